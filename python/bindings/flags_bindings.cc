// Bindings of the settings registry (core/flags.h) for metajit.flags and `python -m metajit flags`: the table of
// every METAJIT_* setting and its value in the environment. Conversion only: parsing and errors are the registry's,
// and runtime values changed through metajit.flags stay with their owners (metajit/_flags.py asks them).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/flags.h"
#include "core/storage.h"
#include "meta_ops/recomputation.h"

namespace py = pybind11;
using namespace metajit;

namespace {

const FlagDeclaration& declaration_named(const std::string& name) {
  if (const FlagDeclaration* declaration = find_flag_declaration(name)) return *declaration;
  throw py::key_error(name + " is not a metajit setting (core/flag_table.cc lists them)");
}

// The typed value of `text` (the environment's when null): bool, int (bytes for a size), str, or None when unset
// and without a fixed default. A bad value raises ValueError or warns, as the setting is declared.
py::object typed_value(const FlagDeclaration& declaration, const std::optional<std::string>& text) {
  switch (declaration.type) {
    case FlagType::Boolean: return py::bool_(parse_boolean_flag(declaration.flag, text.value_or("")));
    case FlagType::Size: return py::int_(parse_size_flag(declaration.flag, text.value_or("")));
    case FlagType::Choice: return py::str(parse_choice_flag(declaration.flag, text.value_or("")));
    case FlagType::Integer: {
      std::optional<int64_t> value = parse_integer_flag(declaration.flag, text.value_or(""));
      return value ? py::object(py::int_(*value)) : py::object(py::none());
    }
    case FlagType::Text: return text ? py::object(py::str(*text)) : py::object(py::none());
  }
  return py::none();
}

}  // namespace

void bind_flags(py::module_& module) {
  module.def("flag_table", [] {
    py::list rows;
    for (const FlagDeclaration& declaration : flag_declarations()) {
      py::dict row;
      row["name"] = declaration.name;
      row["type"] = flag_type_name(declaration.type);
      row["default"] = declaration.default_value;
      py::list choices;
      std::string rest = declaration.choices;
      for (size_t bar; (bar = rest.find('|')) != std::string::npos; rest = rest.substr(bar + 1))
        choices.append(rest.substr(0, bar));
      if (!rest.empty()) choices.append(rest);
      row["choices"] = choices;
      row["bad_value"] = declaration.bad_value == BadValue::Raise ? "raise" : "warn";
      row["reader"] = declaration.reader == FlagReader::Python ? "python" : "engine";
      row["python_setting"] = declaration.python_setting;
      row["documentation"] = declaration.documentation;
      std::optional<std::string> environment = flag_text(declaration.flag);
      row["environment"] = environment ? py::object(py::str(*environment)) : py::object(py::none());
      rows.append(row);
    }
    return rows;
  });
  module.def("device_memory_limit", &device_memory_limit);
  module.def("set_device_memory_limit", [](int64_t bytes) {
    if (bytes < 0)
      throw std::invalid_argument("device_memory_limit must be 0 (no limit) or a number of bytes, got " +
                                  std::to_string(bytes));
    set_device_memory_limit(bytes);
  });
  module.def("memory_budget", &memory_budget);
  module.def("set_memory_budget", &set_memory_budget);
  module.def("last_recomputation_report", [] {
    RecomputationReport report = last_recomputation_report();
    py::dict result;
    result["active"] = report.active;
    result["fits"] = report.fits;
    result["budget_bytes"] = report.budget_bytes;
    result["held_bytes"] = report.held_bytes;
    result["unconstrained_peak_bytes"] = report.unconstrained_peak_bytes;
    result["planned_peak_bytes"] = report.planned_peak_bytes;
    result["saved_bytes"] = report.saved_bytes;
    result["kept_bytes"] = report.kept_bytes;
    result["recomputed_nodes"] = report.recomputed_nodes;
    result["recomputed_contractions"] = report.recomputed_contractions;
    result["stage"] = report.stage;
    return result;
  });
  module.def("flag_value", [](const std::string& name) {
    const FlagDeclaration& declaration = declaration_named(name);
    return typed_value(declaration, flag_text(declaration.flag));
  });
  module.def("parse_flag", [](const std::string& name, const std::string& text) {
    return typed_value(declaration_named(name), text);
  });
}
