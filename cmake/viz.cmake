# Sweeps, timeline, report (docs/sweep.md, docs/report.md): the screenshot test skips with
# exit code 77 when chromium is not installed.
if(LOOM_TESTS AND TEST script.report_screenshot_test)
  set_tests_properties(script.report_screenshot_test PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
