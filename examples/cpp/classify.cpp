// Classifies an image with the C++ API: classify MODEL LABELS IMAGE [DEVICE]
#include <iostream>
#include <tinycoral/tinycoral.hpp>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: classify MODEL LABELS IMAGE [auto|usb|sim|cpu]\n";
    return 2;
  }
  try {
    tinycoral::Interpreter model(argv[1], argc > 4 ? argv[4] : "auto");
    std::map<int, std::string> labels = tinycoral::read_labels(argv[2]);
    tinycoral::set_input_image(model, 0, argv[3]);
    model.invoke();
    for (const tinycoral::Class& c : tinycoral::get_classes(model, 3))
      std::cout << c.id << " " << c.score << " " << labels[c.id] << "\n";
  } catch (const tinycoral::Error& e) {
    std::cerr << "classify: " << e.what() << "\n";
    return 2;
  }
}
