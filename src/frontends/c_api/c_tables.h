// The tables the C library describes itself with, for bindings that cannot read its headers (python/gmlake):
// the stats (include/gmlake/stat_fields.h), the configuration keys (include/gmlake/config.h) and the C functions
// with their signatures (GMLAKE_C_API in include/gmlake/gmlake.h). gmlake.h documents each format. Each text is
// made once, on first use, and lives for the process (static storage).
//
// Thread safety: every function may be called from any thread (C++ static initialization). Never throws but
// bad_alloc on first use.
#pragma once

namespace gmlake::capi {

// "allocated_bytes:gauge,...,num_ooms:counter,...": gmlake_stat_names.
const char* stat_names_text();
// "name\tkind\ttorch_key\n" per statistic: gmlake_stat_table.
const char* stat_table_text();
// "name\ttype\tdefault\tunit\tdescription\n" per key: gmlake_config_table.
const char* config_table_text();
// "name\treturn_type\tparameter_type,...\n" per function of GMLAKE_C_API: gmlake_c_api_table.
const char* c_api_table_text();

}  // namespace gmlake::capi
