// The segment runner: posts the output read first, pushes the OUT DMAs one transfer at a time while
// completing whatever comes in, then reads until every output has its full size and every expected
// event arrived. Every wait is bounded by the segment's deadline.
#include "usb/dma_engine.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace tinycoral::usb {
namespace {

constexpr size_t kInChunk = 1024;            // reads are whole SuperSpeed packets
constexpr size_t kMaxOutputRead = 1u << 20;  // one posted read on EP 0x81
constexpr int kMaxDrainReads = 4096;         // drain stops after this many reads at most

[[noreturn]] void fail_usb(TransferStatus status, const std::string& what) {
  throw UsbError(status, what);
}

bool finished(const Transfer& t) {
  return t.status != TransferStatus::kPending && t.status != TransferStatus::kIdle;
}

}  // namespace

DmaEngine::DmaEngine(Transport& transport, Csr& csr) : transport_(transport), csr_(csr) {}

DmaEngine::~DmaEngine() {
  try {
    cancel_all();
  } catch (...) {
    // A dying transport (or exhausted memory) must not abort the process from a destructor.
  }
}

void DmaEngine::arm_listeners() {
  if (event_transfer_.status != TransferStatus::kPending) {
    event_transfer_ = Transfer{kEpEvent, event_buffer_, kEventBytes};
    transport_.submit(event_transfer_);
  }
  if (interrupt_transfer_.status != TransferStatus::kPending) {
    interrupt_transfer_ = Transfer{kEpInterrupt, interrupt_buffer_, kInterruptBytes};
    transport_.submit(interrupt_transfer_);
  }
}

void DmaEngine::cancel_all() {
  for (Transfer* t : {&output_transfer_, &out_transfer_, &event_transfer_, &interrupt_transfer_})
    if (t->status == TransferStatus::kPending) transport_.cancel(*t);
  const auto deadline = Clock::now() + Millis(1000);
  auto any_pending = [&] {
    for (Transfer* t : {&output_transfer_, &out_transfer_, &event_transfer_, &interrupt_transfer_})
      if (t->status == TransferStatus::kPending) return true;
    return false;
  };
  while (any_pending() && transport_.wait_any(deadline)) {
  }
  if (any_pending()) transport_.cancel_all(Millis(1000));
  for (Transfer* t : {&output_transfer_, &out_transfer_, &event_transfer_, &interrupt_transfer_})
    t->status = TransferStatus::kIdle;
  events_seen_.clear();
}

void DmaEngine::handle_interrupt() {
  uint32_t word = 0;
  for (size_t i = 0; i < kInterruptBytes; ++i) word |= uint32_t{interrupt_buffer_[i]} << (8 * i);
  if (word & 1) {
    const uint64_t status = csr_.read64(reg::kHibErrorStatus);
    const uint64_t first = status ? csr_.read64(reg::kHibFirstErrorStatus) : 0;
    csr_.write64(reg::kUsbFatalErrIntStatus, 0);
    fail_usb(TransferStatus::kError,
             cat("the chip raised a fatal-error interrupt (hib_error_status 0x", std::hex, status,
                 ", first error 0x", first, ")"));
  }
  for (uint32_t i = 0; i < 4; ++i) {
    if (!(word & (2u << i))) continue;
    csr_.write64(reg::kUsbTopLevelInt0Control + 8 + 0x10 * i, 0);  // clear that status
    if (i == 0) fail_usb(TransferStatus::kError, "the chip reports a thermal shutdown");
  }
}

void DmaEngine::take_output_bytes(size_t n, const Segment& segment, size_t& output_index,
                                  size_t& offset) {
  size_t at = 0;
  while (at < n) {
    if (output_index >= segment.outputs.size())
      fail_usb(TransferStatus::kError, cat("the stick sent ", n - at,
                                           " output bytes more than the program's outputs hold"));
    const std::span<uint8_t> dest = segment.outputs[output_index];
    const size_t take = std::min(n - at, dest.size() - offset);
    std::memcpy(dest.data() + offset, staging_.data() + at, take);
    at += take;
    offset += take;
    if (offset == dest.size()) {
      ++output_index;
      offset = 0;
    }
  }
}

void DmaEngine::post_output_read(size_t want) {
  want = std::min(kMaxOutputRead, (want + kInChunk - 1) / kInChunk * kInChunk);
  if (staging_.size() < want) staging_.resize(want);
  output_transfer_ = Transfer{kEpOutput, staging_.data(), want};
  transport_.submit(output_transfer_);
}

void DmaEngine::abort_in_flight() {
  for (Transfer* t : {&output_transfer_, &out_transfer_})
    if (t->status == TransferStatus::kPending) transport_.cancel(*t);
  const auto cancel_deadline = Clock::now() + Millis(1000);
  while ((output_transfer_.status == TransferStatus::kPending ||
          out_transfer_.status == TransferStatus::kPending) &&
         transport_.wait_any(cancel_deadline)) {
  }
  if (output_transfer_.status == TransferStatus::kPending ||
      out_transfer_.status == TransferStatus::kPending)
    cancel_all();
}

bool DmaEngine::step(Clock::time_point deadline, const std::function<void(size_t)>& on_output) {
  if (!transport_.wait_any(deadline)) return false;
  if (finished(interrupt_transfer_)) {
    const Transfer t = interrupt_transfer_;
    interrupt_transfer_.status = TransferStatus::kIdle;
    if (t.status == TransferStatus::kDone && t.actual == kInterruptBytes)
      handle_interrupt();
    else if (t.status != TransferStatus::kCancelled)
      fail_usb(t.status, cat("interrupt endpoint 0x83: ", transfer_status_name(t.status)));
    arm_listeners();
  }
  if (finished(event_transfer_)) {
    const Transfer t = event_transfer_;
    event_transfer_.status = TransferStatus::kIdle;
    if (t.status != TransferStatus::kDone || t.actual != kEventBytes)
      fail_usb(t.status == TransferStatus::kDone ? TransferStatus::kError : t.status,
               cat("event endpoint 0x82: ", transfer_status_name(t.status), " with ", t.actual,
                   " bytes (an event is 16)"));
    DeviceDescriptor d;
    for (int i = 0; i < 8; ++i) d.address |= uint64_t{event_buffer_[i]} << (8 * i);
    for (int i = 0; i < 4; ++i) d.length |= uint32_t{event_buffer_[8 + i]} << (8 * i);
    d.tag = event_buffer_[12] & 0xF;
    events_seen_.push_back(d);
    arm_listeners();
  }
  if (finished(output_transfer_)) {
    const Transfer t = output_transfer_;
    output_transfer_.status = TransferStatus::kIdle;
    if (t.status != TransferStatus::kDone)
      fail_usb(t.status, cat("output endpoint 0x81: ", transfer_status_name(t.status)));
    on_output(t.actual);
  }
  return true;
}

void DmaEngine::send(const OutDma& dma, Clock::time_point deadline, Millis timeout,
                     const std::function<void(size_t)>& on_output) {
  const size_t length = dma.payload.size();
  header_[0] = static_cast<uint8_t>(length);
  header_[1] = static_cast<uint8_t>(length >> 8);
  header_[2] = static_cast<uint8_t>(length >> 16);
  header_[3] = static_cast<uint8_t>(length >> 24);
  header_[4] = static_cast<uint8_t>(dma.tag) & 0xF;
  header_[5] = header_[6] = header_[7] = 0;
  // The header goes alone, then the payload in <= 1 MiB transfers: a transfer never carries the end
  // of one DMA together with the next header.
  for (size_t at = 0, part = 0; part == 0 || at < length; ++part) {
    if (part == 0) {
      out_transfer_ = Transfer{kEpBulkOut, header_, kBulkHeaderBytes};
    } else {
      const size_t n = std::min(kMaxBulkOutChunk, length - at);
      out_transfer_ = Transfer{kEpBulkOut, const_cast<uint8_t*>(dma.payload.data() + at), n};
      at += n;
    }
    transport_.submit(out_transfer_);
    while (out_transfer_.status == TransferStatus::kPending)
      if (!step(deadline, on_output))
        fail_usb(TransferStatus::kTimedOut,
                 cat("the stick did not take a ", length, "-byte DMA (tag ", int(dma.tag),
                     ") within ", timeout.count(), " ms"));
    if (out_transfer_.status != TransferStatus::kDone)
      fail_usb(
          out_transfer_.status,
          cat("bulk OUT of a ", length, "-byte DMA: ", transfer_status_name(out_transfer_.status)));
    out_transfer_.status = TransferStatus::kIdle;
    if (length == 0) break;
  }
}

void DmaEngine::run(const Segment& segment, Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  size_t total = 0;
  for (const auto& o : segment.outputs) total += o.size();
  size_t received = 0, output_index = 0, offset = 0;
  // Outputs of size 0 are complete from the start.
  while (output_index < segment.outputs.size() && segment.outputs[output_index].empty())
    ++output_index;
  const std::function<void(size_t)> on_output = [&](size_t n) {
    take_output_bytes(n, segment, output_index, offset);
    received += n;
    if (received < total) post_output_read(total - received);
  };

  try {
    arm_listeners();
    if (total > 0) post_output_read(total);
    for (const OutDma& dma : segment.outs) send(dma, deadline, timeout, on_output);
    while (received < total || output_transfer_.status == TransferStatus::kPending)
      if (!step(deadline, on_output))
        fail_usb(TransferStatus::kTimedOut, cat("the program produced ", received, " of ", total,
                                                " output bytes within ", timeout.count(), " ms"));
    for (uint8_t tag : segment.events) {
      for (;;) {
        auto it = std::find_if(events_seen_.begin(), events_seen_.end(),
                               [&](const DeviceDescriptor& d) { return d.tag == tag; });
        if (it != events_seen_.end()) {
          events_seen_.erase(events_seen_.begin(), it + 1);
          break;
        }
        if (!step(deadline, on_output))
          fail_usb(TransferStatus::kTimedOut,
                   cat("the program did not signal completion (event tag ", int(tag), ") within ",
                       timeout.count(), " ms"));
      }
    }
  } catch (...) {
    abort_in_flight();
    throw;
  }
}

size_t DmaEngine::drain(Millis per_read_timeout) {
  cancel_all();
  size_t drained = 0;
  std::vector<uint8_t> buffer(64 * 1024);
  for (uint8_t endpoint : {kEpOutput, kEpEvent}) {
    for (int i = 0; i < kMaxDrainReads; ++i) {
      Transfer t{endpoint, buffer.data(), endpoint == kEpOutput ? buffer.size() : kEventBytes};
      const TransferStatus status = transfer_sync(transport_, t, per_read_timeout);
      if (status != TransferStatus::kDone) break;
      drained += t.actual;
    }
  }
  return drained;
}

}  // namespace tinycoral::usb
