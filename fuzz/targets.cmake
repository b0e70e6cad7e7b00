# The fuzz targets, one fuzz/<name>_fuzzer.cc and one seed corpus fuzz/corpus/<name>/ each. Read by
# the fuzz build (fuzz/CMakeLists.txt) and by the suite that runs them (fuzz/tests.cmake).
set(DTRAIN_FUZZ_TARGETS frame handshake idx checkpoint cluster_spec tfrecord csv keras_json
    slurm_hostlist model_spec run_series)
