// How pybind11 passes graph nodes to and from Python: a metajit.Var (a meta_ops Var handle) on the Python side,
// its current node on the C++ side. Every binding that takes or returns a NodePtr goes through here, so the
// bindings stay written in nodes while Python holds Vars whose value in-place ops can rebind. Every binding file
// includes this before any use of NodePtr (one specialization for the whole extension).
#pragma once
#include <pybind11/pybind11.h>

#include "meta_ops/var.h"

namespace pybind11 {
namespace detail {

template <>
class type_caster<metajit::NodePtr> {
 public:
  PYBIND11_TYPE_CASTER(metajit::NodePtr, const_name("Var"));

  bool load(handle source, bool convert) {
    if (source.is_none()) {  // as pybind11 does for holders: None only where conversions are allowed
      if (!convert) return false;
      value = nullptr;
      return true;
    }
    make_caster<metajit::Var> var;
    if (!var.load(source, convert)) return false;
    value = cast_op<metajit::Var&>(var).node();
    return true;
  }

  static handle cast(const metajit::NodePtr& node, return_value_policy, handle) {
    if (!node) return none().release();
    return make_caster<metajit::VarPtr>::cast(std::make_shared<metajit::Var>(node),
                                              return_value_policy::take_ownership, handle());
  }
};

}  // namespace detail
}  // namespace pybind11
