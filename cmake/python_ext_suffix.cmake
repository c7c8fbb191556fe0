# loom_python_ext_suffix(PYTHON OUT): the file name suffix that PYTHON imports extension modules
# by (sysconfig's EXT_SUFFIX, e.g. ".cpython-311-x86_64-linux-gnu.so"). The top-level build names
# loom._loom with it and records it; python/package/ compares its own Python's with that record
# to decide whether build/'s module is one it can install, so both read it here.
function(loom_python_ext_suffix python out)
  execute_process(
    COMMAND "${python}" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"
    OUTPUT_VARIABLE suffix OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
  set(${out} "${suffix}" PARENT_SCOPE)
endfunction()
