// Runs a model exported with mj.export on inputs read from raw files, writes its outputs as raw files, and
// reports the latency of a run. The inputs are the model's inputs in order, each file holding exactly the
// tensor's bytes (numpy: array.astype(dtype).tofile(path)); outputs go to DIRECTORY/<name>.bin.
//
//   cpp_inference MODEL.mjm [INPUT.bin ...] [--outputs DIRECTORY] [--repeat N]
//
// Without input files the inputs are zeros (for timing). --repeat N runs the model N more times after the first
// and prints the median and best latency in milliseconds.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <metajit/runtime.h>

namespace {

std::string describe(const metajit::TensorInfo& info) {
  std::ostringstream text;
  text << info.name << ": " << metajit::data_type_name(info.dtype) << " [";
  for (size_t dim = 0; dim < info.shape.size(); ++dim) text << (dim ? ", " : "") << info.shape[dim];
  text << "]";
  return text.str();
}

metajit::Tensor read_input(const metajit::TensorInfo& info, const std::string& path) {
  metajit::Tensor tensor(info.dtype, info.shape);
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) throw std::runtime_error("cannot open the input file " + path);
  auto size = size_t(file.tellg());
  if (size != tensor.bytes())
    throw std::runtime_error(path + " holds " + std::to_string(size) + " bytes; input " + describe(info) + " needs " +
                             std::to_string(tensor.bytes()));
  file.seekg(0);
  file.read(static_cast<char*>(tensor.data()), std::streamsize(size));
  return tensor;
}

void write_output(const metajit::Tensor& tensor, const std::string& path) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(static_cast<const char*>(tensor.data()), std::streamsize(tensor.bytes()));
  if (!file) throw std::runtime_error("cannot write " + path);
}

int run(int argc, char** argv) {
  std::string model_path, output_directory;
  std::vector<std::string> input_paths;
  int repeat = 0;
  for (int index = 1; index < argc; ++index) {
    std::string argument = argv[index];
    if (argument == "--outputs" && index + 1 < argc) {
      output_directory = argv[++index];
    } else if (argument == "--repeat" && index + 1 < argc) {
      repeat = std::stoi(argv[++index]);
    } else if (argument.rfind("--", 0) == 0) {
      std::cerr << "unknown option " << argument << "\n";
      return 2;
    } else if (model_path.empty()) {
      model_path = argument;
    } else {
      input_paths.push_back(argument);
    }
  }
  if (model_path.empty()) {
    std::cerr << "usage: cpp_inference MODEL.mjm [INPUT.bin ...] [--outputs DIRECTORY] [--repeat N]\n";
    return 2;
  }

  metajit::Model model = metajit::Model::load(model_path);
  std::cout << model_path << " (" << model.producer() << "): " << model.kernel_count() << " kernels, "
            << model.library_call_count() << " library calls, " << model.weight_bytes() << " bytes of weights\n";
  for (const metajit::TensorInfo& info : model.inputs()) std::cout << "  input  " << describe(info) << "\n";
  for (const metajit::TensorInfo& info : model.outputs()) std::cout << "  output " << describe(info) << "\n";
  if (!input_paths.empty() && input_paths.size() != model.inputs().size()) {
    std::cerr << "the model takes " << model.inputs().size() << " inputs, " << input_paths.size() << " files given\n";
    return 2;
  }
  std::vector<metajit::Tensor> inputs;
  for (size_t index = 0; index < model.inputs().size(); ++index)
    inputs.push_back(input_paths.empty() ? metajit::Tensor(model.inputs()[index].dtype, model.inputs()[index].shape)
                                         : read_input(model.inputs()[index], input_paths[index]));

  std::vector<metajit::Tensor> outputs = model.run(inputs);
  if (!output_directory.empty())
    for (size_t index = 0; index < outputs.size(); ++index)
      write_output(outputs[index], output_directory + "/" + model.outputs()[index].name + ".bin");

  if (repeat > 0) {
    std::vector<double> milliseconds;
    for (int round = 0; round < repeat; ++round) {
      auto start = std::chrono::steady_clock::now();
      outputs = model.run(inputs);
      milliseconds.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(milliseconds.begin(), milliseconds.end());
    std::cout << "latency_ms median " << milliseconds[milliseconds.size() / 2] << " best " << milliseconds.front()
              << " runs " << repeat << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::cerr << "cpp_inference: " << error.what() << "\n";
    return 1;
  }
}
