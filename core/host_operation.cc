#include "core/host_operation.h"

#include <stdexcept>

#include "core/executor.h"

namespace metajit {

NodePtr make_host_operation(std::shared_ptr<const HostOperation> operation, DType dtype, Shape shape,
                            std::vector<NodePtr> inputs) {
  bool ordered = operation->ordered();
  NodePtr node = make_node(NodeKind::HostOperation, dtype, std::move(shape), std::move(inputs));
  node->payload = std::make_shared<HostOperationPayload>(std::move(operation));
  if (ordered) add_ordered_node(node);
  return node;
}

const HostOperation& host_operation_of(const Node& node) {
  auto* payload =
      node.kind == NodeKind::HostOperation ? dynamic_cast<const HostOperationPayload*>(node.payload.get()) : nullptr;
  if (!payload) throw std::logic_error("internal error: " + node.op_name() + " is not a host operation");
  return *payload->operation;
}

}  // namespace metajit
