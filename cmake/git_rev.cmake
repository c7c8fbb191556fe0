# Run at every build (`cmake -DSOURCE_DIR=... -DOUTPUT=... -P cmake/git_rev.cmake`): writes
# OUTPUT, the header naming the commit the sources are at, "-dirty" when tracked files differ
# from it. A value fixed at configure time went stale at the next commit, and summary.json and
# `loom version` then named a commit that was not the one built. The header is rewritten only
# when the name changes, so a build at the same commit recompiles nothing.
execute_process(COMMAND git describe --always --dirty --abbrev=7 --exclude=*
                WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE rev
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT rev)
  set(rev "unknown")  # not a git checkout (a source archive)
endif()
file(WRITE ${OUTPUT}.new
     "// Generated at build time by cmake/git_rev.cmake: the commit the build's sources are at.\n"
     "#pragma once\n\n#define LOOM_GIT_REV \"${rev}\"\n")
configure_file(${OUTPUT}.new ${OUTPUT} COPYONLY)
file(REMOVE ${OUTPUT}.new)
