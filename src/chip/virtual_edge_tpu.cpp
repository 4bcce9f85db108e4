// VirtualEdgeTpu: the HostPort face of the simulator (host streams in; outputs and events out).
#include "chip/virtual_edge_tpu.h"

#include <algorithm>

#include "chip/machine.h"
#include "common/error.h"

namespace tinycoral::chip {

VirtualEdgeTpu::VirtualEdgeTpu(ChipOptions options) : impl_(std::make_unique<Impl>(options)) {}
VirtualEdgeTpu::~VirtualEdgeTpu() = default;

void VirtualEdgeTpu::reset() {
  const ChipOptions options = impl_->options;
  impl_ = std::make_unique<Impl>(options);
}

void VirtualEdgeTpu::receive(DmaTag tag, std::span<const uint8_t> payload) {
  Impl& m = *impl_;
  if (!m.fault.empty()) return;  // a faulted chip ignores traffic until reset
  try {
    switch (tag) {
      case DmaTag::kInstructions: {
        if (payload.size() > m.options.max_bitstream_bytes)
          fail("bitstream ", m.programs_received, " has ", payload.size(),
               " bytes, more than the limit of ", m.options.max_bitstream_bytes);
        std::shared_ptr<Program> program = m.reuse_decoded(payload);
        if (!program) {
          program = with_context(cat("bitstream ", m.programs_received),
                                 [&] { return Program::decode(payload); });
          m.remember_decoded(program);
        }
        ++m.programs_received;
        m.pending_programs.push_back(std::move(program));
        if (!m.program) m.start_next_program();
        break;
      }
      case DmaTag::kInput:
      case DmaTag::kParameters: {
        auto& q = m.host_in[tag == DmaTag::kInput ? 1 : 0];
        if (m.buffered_bytes + payload.size() > m.options.max_buffered_bytes)
          fail("host sent more than ", m.options.max_buffered_bytes,
               " bytes the chip has not consumed");
        q.insert(q.end(), payload.begin(), payload.end());
        m.stats.host_in_bytes += payload.size();
        break;
      }
      default:
        fail("host sent a DMA with tag ", static_cast<int>(tag),
             " (only 0, 1, 2 flow host to device)");
    }
  } catch (const Error& e) {
    m.fault = e.what();
  }
}

namespace {
// Programs kept for reuse: a model's caching and execution programs, a few models at a time.
constexpr size_t kDecodedKept = 8;
}  // namespace

std::shared_ptr<Program> VirtualEdgeTpu::Impl::reuse_decoded(std::span<const uint8_t> bitstream) {
  const uint64_t hash = Program::hash_of(bitstream);
  for (auto it = decoded.begin(); it != decoded.end(); ++it) {
    const Program& p = **it;
    if (p.hash != hash ||
        !std::equal(p.bitstream.begin(), p.bitstream.end(), bitstream.begin(), bitstream.end()))
      continue;
    std::shared_ptr<Program> found = *it;  // move to the back: most recently used
    decoded.erase(it);
    decoded.push_back(found);
    return found;
  }
  return nullptr;
}

void VirtualEdgeTpu::Impl::remember_decoded(std::shared_ptr<Program> program) {
  // Few programs, and few bytes: a decoded program takes ~60 times its bitstream's size.
  uint64_t bytes = program->bitstream.size();
  for (const auto& p : decoded) bytes += p->bitstream.size();
  while (!decoded.empty() &&
         (decoded.size() >= kDecodedKept || bytes > 2 * options.max_bitstream_bytes)) {
    bytes -= decoded.front()->bitstream.size();
    decoded.erase(decoded.begin());
  }
  decoded.push_back(std::move(program));
}

RunState VirtualEdgeTpu::advance() { return impl_->advance(); }

std::optional<std::vector<uint8_t>> VirtualEdgeTpu::take_output() {
  if (impl_->outputs.empty()) return std::nullopt;
  auto out = std::move(impl_->outputs.front());
  impl_->outputs.pop_front();
  return out;
}

std::optional<HostEvent> VirtualEdgeTpu::take_event() {
  if (impl_->events.empty()) return std::nullopt;
  const HostEvent e = impl_->events.front();
  impl_->events.pop_front();
  return e;
}

std::string VirtualEdgeTpu::fault() const { return impl_->fault; }

ChipStats VirtualEdgeTpu::stats() const {
  ChipStats s = impl_->stats;
  s.clock = impl_->clock.stats();
  for (const Tile& t : impl_->tiles) {
    s.narrow_bytes_read += t.stats.narrow_bytes_read;
    s.narrow_bytes_written += t.stats.narrow_bytes_written;
    s.wide_bytes_read += t.stats.wide_bytes_read;
    s.wide_bytes_written += t.stats.wide_bytes_written;
  }
  return s;
}

const Tile& VirtualEdgeTpu::tile(uint32_t index) const { return impl_->tiles.at(index); }

void VirtualEdgeTpu::set_trace(TraceSink* trace) { impl_->options.trace = trace; }

}  // namespace tinycoral::chip
