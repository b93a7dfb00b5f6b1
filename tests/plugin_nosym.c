/* plugin_nosym.c: a shared object that is not a calf plug-in (it defines no
 * calf_plugin_register), for test_api_host: loading it must fail with a message. */
int calf_plugin_registr(int abi_version);
int calf_plugin_registr(int abi_version) { return abi_version; }
