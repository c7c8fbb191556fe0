# The parameter server's tests (tests/sync/ps_*_test.cc) drive whole training runs, so the
# sync test binary also links the train layer.
if(TARGET loom_sync_tests)
  target_link_libraries(loom_sync_tests PRIVATE loom_train)
endif()
