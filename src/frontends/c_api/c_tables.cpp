#include "frontends/c_api/c_tables.h"

#include <cstdint>
#include <string>
#include <type_traits>

#include "gmlake/config.h"
#include "gmlake/gmlake.h"

namespace gmlake::capi {
namespace {

template <typename T>
inline constexpr bool kUnsupportedType = false;

// A parameter's or return value's type as gmlake_c_api_table spells it (gmlake.h): by what a binding passes.
// size_t and uint64_t are one type on this ABI (LP64), and a binding passes both the same way: "uint64".
template <typename T>
constexpr const char* c_type_name() {
  if constexpr (std::is_void_v<T>) {
    return "void";
  } else if constexpr (std::is_same_v<T, const char*>) {
    return "string";
  } else if constexpr (std::is_pointer_v<T>) {
    return "pointer";
  } else if constexpr (std::is_same_v<T, gmlake_pool_id>) {
    return "gmlake_pool_id";
  } else if constexpr (std::is_integral_v<T> && sizeof(T) == 4 && std::is_signed_v<T>) {
    return "int32";
  } else if constexpr (std::is_integral_v<T> && sizeof(T) == 8 && std::is_signed_v<T>) {
    return "int64";
  } else if constexpr (std::is_integral_v<T> && sizeof(T) == 8 && std::is_unsigned_v<T>) {
    return "uint64";
  } else {
    static_assert(kUnsupportedType<T>, "a C API type gmlake_c_api_table cannot name: add it here and in gmlake.h");
  }
}

template <typename Return, typename... Parameters>
std::string signature_line(const char* name, Return (*)(Parameters...)) {
  std::string parameters;
  ((parameters += (parameters.empty() ? "" : ",") + std::string(c_type_name<Parameters>())), ...);
  return std::string(name) + "\t" + c_type_name<Return>() + "\t" + parameters + "\n";
}

}  // namespace

const char* stat_names_text() {
  static const std::string names = [] {
    std::string text;
    auto add = [&](const char* name, const char* kind) {
      text += (text.empty() ? "" : ",") + std::string(name) + ":" + kind;
    };
#define GMLAKE_C_GAUGE_NAME(name, torch_key) add(#name, "gauge");
#define GMLAKE_C_COUNTER_NAME(name, torch_key) add(#name, "counter");
    GMLAKE_GAUGE_FIELDS(GMLAKE_C_GAUGE_NAME)
    GMLAKE_COUNTER_FIELDS(GMLAKE_C_COUNTER_NAME)
#undef GMLAKE_C_GAUGE_NAME
#undef GMLAKE_C_COUNTER_NAME
    return text;
  }();
  return names.c_str();
}

const char* stat_table_text() {
  static const std::string table = [] {
    std::string text;
#define GMLAKE_C_GAUGE_ROW(name, torch_key) text += std::string(#name) + "\tgauge\t" + torch_key + "\n";
#define GMLAKE_C_COUNTER_ROW(name, torch_key) text += std::string(#name) + "\tcounter\t" + torch_key + "\n";
    GMLAKE_GAUGE_FIELDS(GMLAKE_C_GAUGE_ROW)
    GMLAKE_COUNTER_FIELDS(GMLAKE_C_COUNTER_ROW)
#undef GMLAKE_C_GAUGE_ROW
#undef GMLAKE_C_COUNTER_ROW
    return text;
  }();
  return table.c_str();
}

const char* config_table_text() {
  static const std::string table = [] {
    std::string text;
    for (const ConfigFieldInfo& f : config_fields()) {
      text += std::string(f.name) + "\t" + f.type + "\t" + f.default_value + "\t" + f.unit + "\t" + f.description + "\n";
    }
    return text;
  }();
  return table.c_str();
}

const char* c_api_table_text() {
  static const std::string table = [] {
    std::string text;
#define GMLAKE_C_API_ROW(name) text += signature_line(#name, &::name);
    GMLAKE_C_API(GMLAKE_C_API_ROW)
#undef GMLAKE_C_API_ROW
    return text;
  }();
  return table.c_str();
}

}  // namespace gmlake::capi
