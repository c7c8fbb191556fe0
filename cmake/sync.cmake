# sync tests: the tiny training harness shared by tests/sync/*_test.cc (not a test itself).
if(TARGET loom_sync_tests)
  target_sources(loom_sync_tests PRIVATE ${CMAKE_SOURCE_DIR}/tests/sync/tiny_training.cc)
endif()
