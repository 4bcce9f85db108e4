// The compile pipeline (compile.h).
#include "compiler/compile.h"

#include "common/error.h"
#include "compiler/depthwise_codegen.h"
#include "compiler/depthwise_layer.h"
#include "compiler/fc_codegen.h"
#include "compiler/fc_layer.h"
#include "compiler/writer.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"

namespace tinycoral::compiler {

CompileResult compile_model(std::span<const uint8_t> tflite_bytes) {
  const container::Model cpu = container::read_tflite(tflite_bytes);
  CompileResult r;
  r.graph = import_graph(cpu);
  r.partition = partition(r.graph);
  if (!r.partition.mapped_ops.empty()) {
    FcLayer layer;
    DepthwiseLayer dw;
    std::string why = match_fc(r.graph, r.partition.mapped_ops, layer);
    if (why.empty()) why = fc_unsupported(layer.n, layer.k);
    std::string dw_why = match_depthwise(r.graph, r.partition.mapped_ops, dw);
    if (dw_why.empty()) dw_why = depthwise_unsupported(dw);
    if (why.empty()) {
      FcPrograms programs = generate_fc(layer);
      const container::Package package =
          make_package({std::move(programs.execution), std::move(programs.caching)});
      r.tflite = write_edgetpu_tflite(cpu, r.partition, package);
      r.edgetpu_subgraphs = 1;
    } else if (dw_why.empty()) {
      DepthwisePrograms programs = generate_depthwise(dw);
      const container::Package package =
          make_package({std::move(programs.execution), std::move(programs.caching)});
      r.tflite = write_edgetpu_tflite(cpu, r.partition, package);
      r.edgetpu_subgraphs = 1;
    } else {
      // A part that holds a DEPTHWISE_CONV_2D logs the depthwise generator's reason.
      bool depthwise = false;
      for (int i : r.partition.mapped_ops) {
        depthwise |= r.graph.ops.at(static_cast<size_t>(i)).builtin ==
                     static_cast<int32_t>(container::BuiltinOp::kDepthwiseConv2D);
      }
      unmap_all(r.partition, depthwise ? dw_why : why);
    }
  }
  if (r.edgetpu_subgraphs == 0) r.tflite = container::write_tflite(cpu);
  r.rows = log_rows(r.graph, r.partition);
  return r;
}

}  // namespace tinycoral::compiler
