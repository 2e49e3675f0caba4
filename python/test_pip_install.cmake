# ctest's python_pip_install: pip install SOURCE_DIR into WORK_DIR/site with PYTHON (its own
# CMake build, CPU backend only), then python/tests without the torch ones against that copy.
cmake_minimum_required(VERSION 3.25)

include(${CMAKE_CURRENT_LIST_DIR}/../cmake/run_step.cmake)

file(REMOVE_RECURSE ${WORK_DIR})
run_step(${PYTHON} -m pip install --no-build-isolation --no-deps --disable-pip-version-check
         --target ${WORK_DIR}/site -C cmake.define.TURBODECODE_CUDA=OFF
         -C build-dir=${WORK_DIR}/build ${SOURCE_DIR})
set(installed ${CMAKE_COMMAND} -E env PYTHONPATH=${WORK_DIR}/site ${PYTHON})
run_step(${installed} -c "import turbodecode, sys; print('testing', turbodecode.__file__)")
run_step(${installed} -m pytest -q -p no:cacheprovider ${SOURCE_DIR}/python/tests
         --ignore=${SOURCE_DIR}/python/tests/test_torch.py
         --ignore=${SOURCE_DIR}/python/tests/test_example.py)
