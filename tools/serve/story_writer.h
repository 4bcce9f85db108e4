// The Write view's engine: a llama2.c checkpoint and its tokenizer, loaded once, writing one story
// at a time exactly as `tinycoral generate` does (same sampler, same seed rules, same pieces, same
// device rules: cpu in float32; sim or usb through the chip path, llm/chip_model.h, calibrated as
// generate calibrates; auto a stick when one is plugged in, else the CPU), so that a prompt, a seed
// and a device give the same text in the browser and on the command line. Without a checkpoint it
// writes with a small random one made in memory (noise, and the page says so). An Edge TPU session
// stays open between stories (the layers' weights stay resident); one that fails is closed and the
// next story opens the device again.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "device_access.h"
#include "llm/checkpoint.h"
#include "llm/chip_model.h"
#include "llm/thread_pool.h"
#include "llm/tokenizer.h"
#include "llm/transformer.h"

namespace tinycoral::serve {

struct StoryRequest {
  std::string prompt;
  float temperature = 1.0f, topp = 0.9f;
  uint64_t seed = 0;   // 0: the time (run.c's rule)
  int steps = 256;     // positions, prompt included; 0 or more than seq_len: seq_len
  std::string device;  // auto, usb, usb:N, sim, cpu; "": the server's
};

struct StoryResult {
  int tokens = 0;     // prompt and story, BOS included
  int positions = 0;  // forward passes run
  double tokens_per_second = 0;
  uint64_t seed = 0;
  bool stopped = false;  // the listener asked to stop
  std::string device;    // cpu, sim or usb
  // The chip path (sim, usb): layer matmuls on the chip and on the host, and on the virtual Edge
  // TPU the stick's modeled speed at 250 MHz (runtime/stick_time.h) for the story's chip runs
  // alone, and with the host's measured share added (as `tinycoral generate` reports them).
  int matmuls_on_chip = 0, matmuls_on_host = 0;
  double modeled_stick_tokens_per_second = 0, modeled_tokens_per_second_with_host = 0;
};

class StoryWriter {
 public:
  // `checkpoint` empty: a random one (fixed seed) with the tokenizer's vocabulary. `tokenizer`
  // empty: tokenizer.bin beside the checkpoint, else in the working directory.
  // `device`: the default for requests that name none.
  StoryWriter(const std::string& checkpoint, const std::string& tokenizer, int threads = 0,
              const std::string& device = "cpu", DeviceAccess access = system_devices());
  ~StoryWriter();

  bool random_checkpoint() const { return random_; }
  std::string description() const;  // the checkpoint's shapes
  int seq_len() const { return ck_.config.seq_len; }
  int threads() const { return threads_; }
  const std::string& default_device() const { return default_device_; }

  // Throws Error when the prompt does not fit in seq_len (checked before the request waits).
  void check_prompt(const std::string& prompt) const;

  // Makes ready the device `device` names ("": the default) and returns which it is: cpu, sim or
  // usb. Opens an Edge TPU session (calibrating and caching the weights) unless the same is open.
  // Throws Error when the device cannot be opened.
  std::string open(const std::string& device);

  // Writes a story on the device the last open() made ready; each piece of text goes to `piece`
  // as it is made. When `piece` returns false (the client went away) the story stops there. Throws
  // Error for a prompt that does not fit, or when the Edge TPU fails (the session is closed then).
  StoryResult write(const StoryRequest& request,
                    const std::function<bool(const std::string& piece)>& piece);

  // Whether the open session is on a real stick, and closing it: a stick serves one session at a
  // time, so the classifier's and this one take turns.
  bool holds_stick() const { return tpu_ && !tpu_->is_virtual(); }
  void release();

 private:
  llm::Checkpoint ck_;
  bool random_ = false;
  int threads_ = 1;
  std::unique_ptr<llm::Tokenizer> tokenizer_;
  std::unique_ptr<llm::ThreadPool> pool_;
  std::unique_ptr<llm::Transformer> model_;  // float32, on the CPU
  std::string default_device_;
  DeviceAccess access_;
  std::unique_ptr<llm::Calibration> calibration_;  // made on the first chip story
  // The Edge TPU session: which device string it was opened for, the device, the chip path.
  std::string tpu_spec_;
  std::unique_ptr<runtime::EdgeTpu> tpu_;
  std::unique_ptr<llm::ChipTransformer> chip_model_;
  bool use_chip_ = false;  // the last open() chose the Edge TPU session
};

// A llama2.c model with random weights (normal, scaled by fan-in) and small shapes: dim 64, two
// layers, grouped-query attention, `vocab_size` tokens, seq_len 256. The same seed gives the same
// weights.
llm::Checkpoint random_checkpoint(int vocab_size, uint64_t seed);

}  // namespace tinycoral::serve
