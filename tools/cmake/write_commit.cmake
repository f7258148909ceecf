# Run at every build (cmake -P): writes OUT, a header defining SPRIG_COMMIT as the source tree's
# git commit ("-dirty" when tracked files differ from it; "unknown" when SOURCE_DIR is not the top
# of a git checkout, e.g. a tarball), and rewrites it only when that changes, so `sprig --version`
# names the commit it was built from.
set(commit "unknown")
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --show-toplevel
                OUTPUT_VARIABLE top OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                RESULT_VARIABLE failed)
if(NOT failed)
  file(REAL_PATH "${top}" top)
  file(REAL_PATH "${SOURCE_DIR}" source)
endif()
if(NOT failed AND top STREQUAL source)
  execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  execute_process(COMMAND git --no-optional-locks -C "${SOURCE_DIR}" status --porcelain
                          --untracked-files=no
                  OUTPUT_VARIABLE changes ERROR_QUIET RESULT_VARIABLE status_failed)
  if(status_failed OR changes)
    string(APPEND commit "-dirty")
  endif()
endif()
set(text "#define SPRIG_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
