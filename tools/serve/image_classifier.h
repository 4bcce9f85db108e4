// The See and Chip views' engine: a compiled classification model (Google's MobileNet by default,
// any *_edgetpu.tflite by choice) on one device, kept open between requests. Each classification
// runs exactly as `tinycoral run --image ... --top 5` does (same decoding, resizing and scores) and
// records what the chip did: on the virtual Edge TPU its per-tile work, ring, mesh and USB traffic
// and the modeled stick time by unit; on a real stick what the runtime measured. A stick that stops
// answering is dropped and reopened on the next request.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "chip/virtual_edge_tpu.h"
#include "device_access.h"
#include "host/image.h"
#include "host/interpreter.h"
#include "host/labels.h"
#include "runtime/edgetpu.h"

namespace tinycoral::serve {

struct ClassifierOptions {
  std::string model;   // the default model; empty: none (the See view says how to give one)
  std::string labels;  // labels file (imagenet_labels.txt)
  std::string device = "auto";
  std::string firmware;
};

class ImageClassifier {
 public:
  explicit ImageClassifier(ClassifierOptions options, DeviceAccess access = system_devices());
  ~ImageClassifier();

  // The models to choose from: the default and every *_edgetpu.tflite beside it (file names).
  const std::vector<std::string>& models() const { return models_; }
  const std::string& default_model() const { return default_model_; }

  // Classifies a decoded image (host::decode_image) with `model` (one of models(), "" = the
  // default) on `device` (auto, usb, usb:N, sim, cpu; "" = the server's). Returns {device, model,
  // top (5 x index, score, label), time_ms, ...}. Throws Error for a bad image, model or device.
  nlohmann::json classify(const host::Image& image, const std::string& model,
                          const std::string& device);

  // What the chip did in the last classification (null before the first).
  const nlohmann::json& last_chip() const { return last_chip_; }

  // Whether the open session is on a real stick, and closing it (see StoryWriter::release).
  bool holds_stick() const { return tpu_ && !tpu_->is_virtual(); }
  void release();

 private:
  void open(const std::string& model, const std::string& device);

  ClassifierOptions options_;
  DeviceAccess access_;
  std::vector<std::string> models_;
  std::string default_model_, model_dir_;
  host::Labels labels_;
  // The open session: which model on which device.
  std::string open_model_, open_device_, device_used_;
  std::shared_ptr<chip::VirtualEdgeTpu> sim_chip_;
  std::shared_ptr<runtime::EdgeTpu> tpu_;
  std::unique_ptr<host::Interpreter> interpreter_;
  nlohmann::json last_chip_;
};

}  // namespace tinycoral::serve
