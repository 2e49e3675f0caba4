# run_step(COMMAND...): runs a command from a cmake -P script and stops the script with the
# command line when it fails.
function(run_step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    string(JOIN " " command ${ARGN})
    message(FATAL_ERROR "failed (${result}): ${command}")
  endif()
endfunction()
