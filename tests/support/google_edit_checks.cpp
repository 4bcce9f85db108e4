// Google's checks that edit a model before running it (google_expectations.md 2.5-2.6): a
// classifier appended to the embedding extractor (learn utils: G010-G012) and recurrent links
// made inside split_concat (libcoral's tflite_graph_util: G027-G032). The edited model is written
// with our TFLite writer to a temporary file and run on the device under test like any other.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "common/error.h"
#include "common/file.h"
#include "container/classifier_head.h"
#include "container/recurrent_links.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"
#include "support/google_expectations_pieces.h"
#include "support/numpy_random.h"

namespace tinycoral::host::expectation_pieces {

namespace fs = std::filesystem;

namespace {

// An edited model in a temporary file for the life of the object.
class TempModel {
 public:
  TempModel(const container::Model& model, const std::string& tag)
      : path_(fs::temp_directory_path() /
              cat("tinycoral_", tag, "_", ::getpid(), "_", counter()++, ".tflite")) {
    write_file(path_, container::write_tflite(model));
  }
  ~TempModel() {
    std::error_code ignored;
    fs::remove(path_, ignored);
  }
  TempModel(const TempModel&) = delete;
  TempModel& operator=(const TempModel&) = delete;
  const fs::path& path() const { return path_; }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  fs::path path_;
};

size_t input_bytes(const ModelSession& s, size_t i) {
  size_t n = container::tensor_type_size(s.input(i).type);
  for (int32_t d : s.input(i).shape) n *= static_cast<size_t>(d);
  return n;
}

// Google's C++ tests' random input: std::default_random_engine seeded 1, bytes 0..255.
std::vector<uint8_t> seeded_bytes(size_t n) {
  std::default_random_engine rng(1);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(byte(rng));
  return out;
}

std::vector<double> number_list(const std::string& s) {
  std::vector<double> out;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t comma = s.find(',', pos);
    out.push_back(std::stod(s.substr(pos, comma - pos)));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

std::vector<float> softmax(const std::vector<float>& logits) {
  const float top = *std::max_element(logits.begin(), logits.end());
  std::vector<float> out;
  float sum = 0;
  for (float l : logits) sum += out.emplace_back(std::exp(l - top));
  for (float& v : out) v /= sum;
  return out;
}

std::string list(const std::vector<float>& v, int precision) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + fmt(v[i], precision);
  return s;
}

// "inputs/rnn1<-outputs/rnn1,inputs/rnn2<-outputs/rnn2" (an optional leading "link ").
std::vector<container::RecurrentLink> links_of(std::string s) {
  if (s.rfind("link ", 0) == 0) s = s.substr(5);
  std::vector<container::RecurrentLink> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = std::min(s.find(',', pos), s.size());
    const std::string item = s.substr(pos, comma - pos);
    const size_t arrow = item.find("<-");
    if (arrow == std::string::npos) fail("link '", item, "' is not input<-output");
    out.push_back({item.substr(0, arrow), item.substr(arrow + 2)});
    pos = comma + 1;
  }
  return out;
}

size_t named(const std::string& name, size_t count,
             const std::function<const container::Tensor&(size_t)>& tensor) {
  for (size_t i = 0; i < count; ++i)
    if (tensor(i).name == name) return i;
  fail("the model has no input or output '", name, "'");
}

}  // namespace

// G010-G012: run the extractor, derive a classifier from its embedding as Google's test does,
// append it, run the new model on the same input and compare its scores with the row's.
CheckResult append_fc_softmax(const ExpectationRow& row, const ExpectationOptions& o) {
  const fs::path path = o.testdata / row.model;
  auto extractor = open_model(o.device, path);
  if (extractor->num_inputs() != 1 || extractor->num_outputs() != 1)
    fail("an embedding extractor has one input and one output, this model ",
         extractor->num_inputs(), " and ", extractor->num_outputs());
  // The Python test (num_classes given) draws input, weights and biases from one numpy stream.
  const bool numpy_form = row.params.count("num_classes") > 0;
  testing::NumpyRandomState numpy(12345);
  const std::vector<uint8_t> input = numpy_form
                                         ? numpy.randint_uint8(0, 255, input_bytes(*extractor, 0))
                                         : seeded_bytes(input_bytes(*extractor, 0));
  extractor->set_input(0, input);
  extractor->invoke();
  const std::vector<float> embedding = real_output(*extractor, 0);
  const size_t dim = embedding.size();

  container::ClassifierHead head;
  std::vector<float> logits, expected;
  double tol = 0;
  bool strict = false;  // numpy's decimal=2 is |error| < 1.5e-2; gtest's EXPECT_NEAR is <=
  if (!numpy_form) {
    if (dim != static_cast<size_t>(number(row, "embedding_dim")))
      fail("embedding has ", dim, " values, the row says ", text(row, "embedding_dim"));
    const std::vector<double> biases = number_list(text(row, "biases"));
    float sum = 0;
    for (float e : embedding) sum += e;
    const float scalar = 1 / (sum * 3);  // logits 1/3, 2/3, 1 whatever the embedding
    for (size_t c = 0; c < biases.size(); ++c) {
      head.weights.insert(head.weights.end(), dim, scalar * static_cast<float>(c + 1));
      head.biases.push_back(static_cast<float>(biases[c]));
      logits.push_back(sum * scalar * static_cast<float>(c + 1));
    }
    for (double e : number_list(text(row, "expected"))) expected.push_back(static_cast<float>(e));
    tol = number(row, "abs_tol");
  } else {
    const auto classes = static_cast<size_t>(number(row, "num_classes"));
    const std::vector<double> w = numpy.randn(dim * classes);  // [dim][classes]
    const std::vector<double> b = numpy.randn(classes);
    head.weights.resize(dim * classes);
    for (size_t c = 0; c < classes; ++c) {
      double l = static_cast<float>(b[c]);
      for (size_t i = 0; i < dim; ++i) {
        const auto wf = static_cast<float>(w[i * classes + c]);
        head.weights[c * dim + i] = wf;
        l += static_cast<double>(embedding[i]) * wf;
      }
      head.biases.push_back(static_cast<float>(b[c]));
      logits.push_back(static_cast<float>(l));
    }
    expected = softmax(logits);
    const std::string t = text(row, "tol");
    const size_t lt = t.find("abs<");
    if (lt == std::string::npos) fail("tolerance '", t, "' names no abs< bound");
    tol = std::stod(t.substr(lt + 4));
    strict = true;
  }
  head.logits_min = *std::min_element(logits.begin(), logits.end());
  head.logits_max = *std::max_element(logits.begin(), logits.end());

  const TempModel edited(container::append_classifier_head(container::read_tflite_file(path), head),
                         row.id);
  auto classifier = open_model(o.device, edited.path());
  classifier->set_input(0, input);
  classifier->invoke();
  const std::vector<float> scores = real_output(*classifier, 0);
  if (scores.size() != expected.size())
    return verdict(false, cat(scores.size(), " scores, expected ", expected.size()));
  double worst = 0;
  for (size_t i = 0; i < scores.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(scores[i]) - expected[i]));
  const bool ok = strict ? worst < tol : worst <= tol;
  return verdict(ok, cat("scores ", list(scores, 4), " vs ", list(expected, 4), ": worst ",
                         fmt(worst, 4), " (tol ", strict ? "< " : "", fmt(tol, 3), "; logits ",
                         fmt(head.logits_min, 2), " to ", fmt(head.logits_max, 2), ")"));
}

// G027/G028/G031: the model after the surgery opens on the device with these many inputs and
// outputs (and runs).
CheckResult graph_surgery_io_counts(const ExpectationRow& row, const ExpectationOptions& o) {
  const fs::path path = existing(o.testdata / row.model);
  const std::string surgery = text(row, "surgery");
  const auto links =
      surgery == "none" ? std::vector<container::RecurrentLink>{} : links_of(surgery);
  const TempModel edited(
      container::append_recurrent_links(container::read_tflite_file(path), links), row.id);
  auto s = open_model(o.device, edited.path());
  for (size_t i = 0; i < s->num_inputs(); ++i)
    s->set_input(i, std::vector<uint8_t>(input_bytes(*s, i), 0));
  s->invoke();
  const auto want_in = static_cast<size_t>(number(row, "inputs"));
  const auto want_out = static_cast<size_t>(number(row, "outputs"));
  return verdict(s->num_inputs() == want_in && s->num_outputs() == want_out,
                 cat(s->num_inputs(), " inputs, ", s->num_outputs(), " outputs after linking ",
                     links.size(), " pair(s) (need ", want_in, ", ", want_out, "); it runs"));
}

// G029/G032: over 5 frames the linked model's outputs equal the original's with the state fed back
// by hand (hidden inputs zero at first, each linked output copied into its input after a frame).
CheckResult recurrent_sequence_equivalence(const ExpectationRow& row, const ExpectationOptions& o) {
  const fs::path path = existing(o.testdata / row.model);
  const auto links = links_of(text(row, "links"));
  auto original = open_model(o.device, path);
  const TempModel edited(
      container::append_recurrent_links(container::read_tflite_file(path), links), row.id);
  auto linked = open_model(o.device, edited.path());

  std::vector<std::pair<size_t, size_t>> feedback;  // (original output, original input)
  std::vector<bool> is_state_input(original->num_inputs()),
      is_state_output(original->num_outputs());
  for (const auto& l : links) {
    const size_t in =
        named(l.input, original->num_inputs(),
              [&](size_t i) -> const container::Tensor& { return original->input(i); });
    const size_t out =
        named(l.output, original->num_outputs(),
              [&](size_t i) -> const container::Tensor& { return original->output(i); });
    feedback.emplace_back(out, in);
    is_state_input[in] = true;
    is_state_output[out] = true;
  }
  for (size_t i = 0; i < original->num_inputs(); ++i)
    if (is_state_input[i]) original->set_input(i, std::vector<uint8_t>(input_bytes(*original, i)));
  if (linked->num_outputs() + links.size() != original->num_outputs())
    return verdict(false, cat("the linked model has ", linked->num_outputs(), " outputs"));

  const int frames = 5;  // every frame the same seeded input, as Google's test fills it
  size_t compared = 0, differing = 0;
  std::vector<uint8_t> first_frame;
  bool frames_differ = false;
  for (int f = 0; f < frames; ++f) {
    size_t li = 0;
    for (size_t i = 0; i < original->num_inputs(); ++i) {
      if (is_state_input[i]) continue;
      const std::vector<uint8_t> bytes = seeded_bytes(input_bytes(*original, i));
      original->set_input(i, bytes);
      linked->set_input(li++, bytes);
    }
    original->invoke();
    linked->invoke();
    std::vector<uint8_t> frame;
    size_t lo = 0;
    for (size_t k = 0; k < original->num_outputs(); ++k) {
      if (is_state_output[k]) continue;
      const auto a = original->output_bytes(k);
      const auto b = linked->output_bytes(lo++);
      if (a.size() != b.size()) return verdict(false, cat("output ", k, " sizes differ"));
      for (size_t j = 0; j < a.size(); ++j) differing += a[j] != b[j];
      compared += a.size();
      frame.insert(frame.end(), b.begin(), b.end());
    }
    if (f == 0) first_frame = frame;
    frames_differ = frames_differ || frame != first_frame;
    for (const auto& [out, in] : feedback) {
      const auto state = original->output_bytes(out);
      original->set_input(in, std::vector<uint8_t>(state.begin(), state.end()));
    }
  }
  return verdict(differing == 0, cat(frames, " frames, ", compared, " output bytes, ", differing,
                                     " differ from the original with manual feedback",
                                     frames_differ ? " (the state changes the outputs)" : ""));
}

}  // namespace tinycoral::host::expectation_pieces
