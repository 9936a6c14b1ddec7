# CTest check of the digits example end to end: `kiln export` turns the committed ONNX model
# into a program for BACKEND (portable, the default here, or kiln) and kiln_classify_digits
# predicts the ten bundled test images twice (cold, then warm load), each equal to its label.
# With -DAOT=ON (kiln) the program embeds the compiled artifact (`--aot`): both loads are hits.
# With the kiln backend it also exports two methods into one multifunction package and runs both.
#   cmake -DKILN=... -DCLASSIFY=... -DDIGITS_DIR=... -DWORK_DIR=... [-DBACKEND=kiln] [-DAOT=ON]
#         -P digits_test.cmake
if(NOT BACKEND)
  set(BACKEND portable)
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
# With KilnBackend, the batch is enumerated (1 and 10 images) so that the functions are static
# and compiled at load: the cache then holds their packed weights.
set(enumerate "")
if(BACKEND STREQUAL "kiln")
  set(enumerate --enumerate forward:x:0=10,1)
  if(AOT)
    list(APPEND enumerate --aot)
  endif()
endif()
execute_process(COMMAND "${KILN}" export "${DIGITS_DIR}/digits.onnx" -o "${WORK_DIR}/digits.kiln"
                        --backend ${BACKEND} ${enumerate}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kiln export digits.onnx failed (exit ${rc}):\n${out}\n${err}")
endif()
# Two processes over one fresh cache: with KilnBackend the first specializes and stores
# (cache miss), the second maps the stored specialization (cache hit).
if(BACKEND STREQUAL "kiln" AND AOT)
  set(expected_cache "hit" "hit")
elseif(BACKEND STREQUAL "kiln")
  set(expected_cache "miss" "hit")
else()
  set(expected_cache "off" "off")
endif()
foreach(cache IN LISTS expected_cache)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env "KILN_CACHE_DIR=${WORK_DIR}/cache"
                          "${CLASSIFY}" "${WORK_DIR}/digits.kiln" "${DIGITS_DIR}/test_images.npy"
                          "${DIGITS_DIR}/test_labels.npy"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "10 of 10 predictions equal their labels")
    message(FATAL_ERROR "kiln_classify_digits failed (exit ${rc}):\n${out}\n${err}")
  endif()
  if(NOT out MATCHES "cache ${cache}")
    message(FATAL_ERROR "kiln_classify_digits: expected 'cache ${cache}' (backend ${BACKEND}):\n"
                        "${out}\n${err}")
  endif()
  message(STATUS "digits ok (backend ${BACKEND}, cache ${cache}):\n${out}")
endforeach()

if(NOT BACKEND STREQUAL "kiln" OR AOT)
  return()
endif()
# kiln bench --later-loads: two more whole loads in the process (unshared), from the cache the
# runs above filled; a sharing option beside it is refused.
execute_process(COMMAND "${KILN}" bench "${WORK_DIR}/digits.kiln" --input
                        "x=${DIGITS_DIR}/test_images.npy" --runs 2 --warmup 0 --later-loads 2
                        --option "KilnBackend.cache_dir=${WORK_DIR}/cache"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "cache hit"
   OR NOT out MATCHES "later     2 more load\\(s\\) in this process: [0-9.]+ ms [0-9.]+ ms \\(cache hit\\)")
  message(FATAL_ERROR "kiln bench --later-loads (exit ${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND "${KILN}" bench "${WORK_DIR}/digits.kiln" --later-loads 1
                        --option KilnBackend.share_multifunction_model=true
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "--later-loads loads the method again with KilnBackend.share_multifunction_model=false")
  message(FATAL_ERROR "kiln bench --later-loads with a sharing option (exit ${rc}):\n${out}\n${err}")
endif()
# Two methods over one multifunction package (weights once), each with its own enumeration.
execute_process(COMMAND "${KILN}" export -o "${WORK_DIR}/multi.kiln" --multifunction
                        --method "forward=${DIGITS_DIR}/digits.onnx"
                        --method "batch10=${DIGITS_DIR}/digits.onnx"
                        --enumerate forward:x:0=1,10 --enumerate batch10:x:0=10
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kiln export --multifunction failed (exit ${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND "${KILN}" inspect "${WORK_DIR}/multi.kiln" --json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCHALL "\"kiln/package/[0-9a-f]+\"" packages "${out}")
list(REMOVE_DUPLICATES packages)
list(LENGTH packages count)
if(NOT rc EQUAL 0 OR NOT count EQUAL 1)
  message(FATAL_ERROR "kiln inspect: expected one shared package, found ${count}:\n${out}\n${err}")
endif()
foreach(method forward batch10)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env "KILN_CACHE_DIR=${WORK_DIR}/cache"
                          "${KILN}" run "${WORK_DIR}/multi.kiln" --method ${method}
                          --input "x=${DIGITS_DIR}/test_images.npy"
                          --option KilnBackend.share_multifunction_model=true
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "output  [^:]*: f32 \\[10, 10\\]")
    message(FATAL_ERROR "kiln run --method ${method} failed (exit ${rc}):\n${out}\n${err}")
  endif()
endforeach()
execute_process(COMMAND "${KILN}" export -o "${WORK_DIR}/bad.kiln" --method "nomodel"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "expected NAME=MODEL.onnx")
  message(FATAL_ERROR "kiln export --method nomodel: expected an error naming the form:\n${err}")
endif()
message(STATUS "multifunction export ok")
