# Smoke test of poise-demo: runs it briefly with --json and checks the facts
# that must hold whatever the timing:
#   cmake -DDEMO=path/to/poise-demo -P demo_smoke.cmake
# - every policy's calls add up: ok + failed = sent, and the per-backend calls
#   add up to ok;
# - weighted_rendezvous with every backend up served each key from exactly one
#   backend, spilled nothing, and failed no call;
# - after a backend stopped, no call reached it, and for weighted_rendezvous
#   exactly the stopped backend's keys moved;
# - the poise channels have statistics; the numbers of picks roughly match.
if(NOT DEMO)
  message(FATAL_ERROR "usage: cmake -DDEMO=poise-demo -P demo_smoke.cmake")
endif()

execute_process(
  COMMAND "${DEMO}" --json --duration 1 --keys 300 --concurrency 8
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err
  RESULT_VARIABLE rc
  TIMEOUT 120)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "poise-demo exited with ${rc}\n${err}")
endif()

# check("<if() condition>" "message"): fails the test unless it holds.
function(check condition what)
  cmake_language(EVAL CODE
    "if(${condition})\n set(_holds TRUE)\nelse()\n set(_holds FALSE)\nendif()")
  if(NOT _holds)
    message(FATAL_ERROR "demo smoke: ${what}\n${out}")
  endif()
endfunction()

# get(var member...) / length(var member...): the JSON value or array length.
macro(get var)
  string(JSON ${var} ERROR_VARIABLE _json_error GET "${out}" ${ARGN})
  if(_json_error)
    message(FATAL_ERROR "demo smoke: ${ARGN}: ${_json_error}\n${out}")
  endif()
endmacro()
macro(length var)
  string(JSON ${var} ERROR_VARIABLE _json_error LENGTH "${out}" ${ARGN})
  if(_json_error)
    message(FATAL_ERROR "demo smoke: ${ARGN}: ${_json_error}\n${out}")
  endif()
endmacro()

length(backend_count backends)
check("backend_count EQUAL 5" "5 backends by default, got ${backend_count}")

length(policy_count policies)
check("policy_count EQUAL 3" "3 policies, got ${policy_count}")
set(seen "")
math(EXPR last_policy "${policy_count} - 1")
math(EXPR last_backend "${backend_count} - 1")
foreach(p RANGE ${last_policy})
  get(name policies ${p} policy)
  list(APPEND seen ${name})
  get(sent policies ${p} calls_sent)
  get(ok policies ${p} calls_ok)
  get(failed policies ${p} calls_failed)
  math(EXPR sum "${ok} + ${failed}")
  check("sum EQUAL sent" "${name}: ok ${ok} + failed ${failed} != sent ${sent}")
  check("ok GREATER 0" "${name}: no call succeeded")
  set(calls 0)
  foreach(b RANGE ${last_backend})
    get(c policies ${p} backends ${b} calls)
    math(EXPR calls "${calls} + ${c}")
  endforeach()
  check("calls EQUAL ok" "${name}: backend calls ${calls} != ok ${ok}")

  if(name STREQUAL "round_robin")
    continue()
  endif()
  get(stats policies ${p} statistics)
  check("stats" "${name}: no StatsSnapshot() entry for the channel")
  get(picks policies ${p} picks)
  check("picks GREATER_EQUAL ok" "${name}: ${picks} picks < ${ok} calls")
  get(stopped policies ${p} stop backend)
  get(on_stopped policies ${p} stop after_calls_on_stopped)
  check("on_stopped EQUAL 0"
        "${name}: ${on_stopped} calls reached ${stopped} after it stopped")
  get(compared policies ${p} stop keys_compared)
  check("compared GREATER 0" "${name}: no key seen before and after the stop")

  if(name STREQUAL "weighted_rendezvous")
    get(many policies ${p} keys_on_multiple_backends)
    check("many EQUAL 0" "${name}: ${many} keys reached several backends")
    check("failed EQUAL 0" "${name}: ${failed} calls failed")
    get(spills policies ${p} spills)
    check("spills EQUAL 0" "${name}: ${spills} spills")
    get(others policies ${p} stop moved_from_others)
    check("others EQUAL 0" "${name}: ${others} keys of live backends moved")
    get(own policies ${p} stop stopped_backend_keys)
    get(moved_own policies ${p} stop moved_from_stopped)
    check("moved_own EQUAL own"
          "${name}: ${moved_own} of ${stopped}'s ${own} keys moved")
    get(moved policies ${p} stop keys_moved)
    check("moved EQUAL own" "${name}: ${moved} keys moved, ${own} expected")
  endif()
endforeach()
if(NOT seen STREQUAL "bounded_load_rendezvous;weighted_rendezvous;round_robin")
  message(FATAL_ERROR "demo smoke: policies ${seen}\n${out}")
endif()
message(STATUS "poise-demo smoke: ok")
