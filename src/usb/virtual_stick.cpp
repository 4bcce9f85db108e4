// The virtual stick's state machine. Register behaviours and descriptors follow docs/driver.md
// ("The virtual stick"); every rule the host breaks becomes a recorded violation.
#include "usb/virtual_stick.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "usb/protocol.h"

namespace tinycoral::usb {
namespace {

// Bootloader: one DFU interface (class 0xFE, subclass 1, no endpoints) and its functional
// descriptor (can download + can upload + will detach, 256-byte blocks, DFU 1.1).
const std::vector<uint8_t> kDfuDevice = {0x12, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x40, 0x6e,
                                         0x1a, 0x9a, 0x08, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01};
const std::vector<uint8_t> kDfuConfig = {
    0x09, 0x02, 0x1b, 0x00, 0x01, 0x01, 0x00, 0x80, 0x32,  // configuration
    0x09, 0x04, 0x00, 0x00, 0x00, 0xfe, 0x01, 0x02, 0x00,  // interface 0: DFU
    0x09, 0x21, 0x0b, 0x64, 0x00, 0x00, 0x01, 0x10, 0x01,  // DFU functional
};
// Application mode, USB 2 variant (docs/driver.md "App-mode USB descriptors").
const std::vector<uint8_t> kAppDevice = {0x12, 0x01, 0x10, 0x02, 0x00, 0x00, 0x00, 0x40, 0xd1,
                                         0x18, 0x02, 0x93, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01};
const std::vector<uint8_t> kAppConfig = {
    0x09, 0x02, 0x3c, 0x00, 0x01, 0x01, 0x00, 0xc0, 0x31,  // configuration, 60 bytes
    0x09, 0x04, 0x00, 0x00, 0x06, 0xff, 0xff, 0xff, 0x00,  // interface 0, 6 endpoints
    0x07, 0x05, 0x01, 0x02, 0x00, 0x02, 0x00,              // EP 0x01 bulk OUT 512
    0x07, 0x05, 0x02, 0x02, 0x00, 0x02, 0x00,              // EP 0x02 bulk OUT 512
    0x07, 0x05, 0x03, 0x02, 0x00, 0x02, 0x00,              // EP 0x03 bulk OUT 512
    0x07, 0x05, 0x81, 0x02, 0x00, 0x02, 0x00,              // EP 0x81 bulk IN 512
    0x07, 0x05, 0x82, 0x02, 0x00, 0x02, 0x00,              // EP 0x82 bulk IN 512
    0x07, 0x05, 0x83, 0x03, 0x40, 0x00, 0x01,              // EP 0x83 interrupt IN 64
};

constexpr uint8_t kDfuErrWrite = 3;
constexpr uint64_t kHibErrorOnFault = 0x1;

ControlResult done(size_t actual = 0) { return ControlResult{TransferStatus::kDone, actual, {}}; }
ControlResult stalled() { return ControlResult{TransferStatus::kStalled, 0, {}}; }

size_t reply(std::span<uint8_t> data, const std::vector<uint8_t>& bytes) {
  const size_t n = std::min(data.size(), bytes.size());
  std::memcpy(data.data(), bytes.data(), n);
  return n;
}

uint32_t force_sleep(uint64_t scu_ctrl_3) { return (scu_ctrl_3 >> kForceSleepShift) & 3; }

}  // namespace

VirtualStick::VirtualStick(chip::HostPort& chip, Mode mode) : chip_(chip), mode_(mode) {
  reset_registers();
}

void VirtualStick::reset_registers() {
  registers_.clear();
  registers_[reg::kIdleRegister] = 0x9000;
  registers_[reg::kRambistCtrl1] = 0x0070007F;
  registers_[reg::kScuCtr7] = 0x000C003F;
  registers_[reg::kOmc0_d4] = 0x1;
  registers_[reg::kScuCtrl0] = 0x941;
  registers_[reg::kScuCtrl2] = 0x00150000;  // rg_gated_gcb = 1: hardware clock gating on
  registers_[reg::kScuCtrl3] = 0x80050410;
  registers_[reg::kOmc0_00] = 0x01000000;  // e-fuse revision 1
  // Which descriptors reach EP 0x82 (bit n = tag n): the interrupts only, as the host sets it
  // unless it serves device-requested DMAs (docs/driver.md "Device-requested DMAs").
  registers_[reg::kDescrEp] = 0xF0;
}

VirtualStick::Mode VirtualStick::mode() const {
  std::lock_guard lock(mutex_);
  return mode_;
}
uint16_t VirtualStick::vendor_id() const {
  return mode() == Mode::kBootloader ? kDfuVendorId : kAppVendorId;
}
uint16_t VirtualStick::product_id() const {
  return mode() == Mode::kBootloader ? kDfuProductId : kAppProductId;
}
std::vector<uint8_t> VirtualStick::device_descriptor() const {
  return mode() == Mode::kBootloader ? kDfuDevice : kAppDevice;
}
std::vector<uint8_t> VirtualStick::config_descriptor() const {
  return mode() == Mode::kBootloader ? kDfuConfig : kAppConfig;
}
bool VirtualStick::wedged() const {
  std::lock_guard lock(mutex_);
  return wedged_;
}
std::vector<std::string> VirtualStick::violations() const {
  std::lock_guard lock(mutex_);
  return violations_;
}
uint64_t VirtualStick::register_value(uint32_t address) const {
  std::lock_guard lock(mutex_);
  return read_register(address);
}
std::vector<uint8_t> VirtualStick::firmware() const {
  std::lock_guard lock(mutex_);
  return firmware_;
}
int VirtualStick::programs_started() const {
  std::lock_guard lock(mutex_);
  return programs_started_;
}
std::string VirtualStick::chip_fault() const {
  std::lock_guard lock(mutex_);
  return chip_fault_;
}
int VirtualStick::chip_resets() const {
  std::lock_guard lock(mutex_);
  return chip_resets_;
}

void VirtualStick::violation(std::string what) { violations_.push_back(std::move(what)); }

// ---- control transfers ----

ControlResult VirtualStick::control(const Setup& setup, std::span<uint8_t> data) {
  std::lock_guard lock(mutex_);
  if (faults_.off_bus) return ControlResult{TransferStatus::kNoDevice, 0, {}};
  if (faults_.wedge_firmware) wedged_ = true;
  if (wedged_) return ControlResult{TransferStatus::kTimedOut, 0, {}};
  if (faults_.time_out_controls > 0) {
    --faults_.time_out_controls;
    return ControlResult{TransferStatus::kTimedOut, 0, {}};
  }
  if (setup.request_type == kStdIn && setup.request == kGetDescriptor) {
    const uint8_t type = setup.value >> 8;
    if (type == kDescDevice)
      return done(reply(data, mode_ == Mode::kBootloader ? kDfuDevice : kAppDevice));
    if (type == kDescConfig)
      return done(reply(data, mode_ == Mode::kBootloader ? kDfuConfig : kAppConfig));
    return stalled();
  }
  return mode_ == Mode::kBootloader ? bootloader_control(setup, data) : app_control(setup, data);
}

ControlResult VirtualStick::bootloader_control(const Setup& setup, std::span<uint8_t> data) {
  if (setup.request_type == kDfuOut && setup.request == kDfuDnload) {
    if (dfu_error_) return stalled();
    const size_t expected_block = (download_.size() + kDfuBlockBytes - 1) / kDfuBlockBytes;
    if (setup.value != (expected_block & 0xFFFF) || data.size() > kDfuBlockBytes) {
      dfu_error_ = true;
      dfu_state_ = kDfuError;
      return done();
    }
    if (data.empty()) {  // the zero-length block ends the download
      download_complete_ = !faults_.fail_dfu;
      dfu_state_ = download_complete_ ? kDfuIdle : kDfuError;
      dfu_error_ = !download_complete_;
      return done();
    }
    if (faults_.fail_dfu) {
      dfu_error_ = true;
      dfu_state_ = kDfuError;
      return done();
    }
    download_.insert(download_.end(), data.begin(), data.end());
    download_complete_ = false;
    dfu_state_ = kDfuDnloadIdle;
    return done();
  }
  if (setup.request_type == kDfuIn && setup.request == kDfuGetStatus && data.size() >= 6) {
    const uint8_t status[6] = {
        static_cast<uint8_t>(dfu_error_ ? kDfuErrWrite : 0), 0, 0, 0, dfu_state_, 0};
    std::memcpy(data.data(), status, 6);
    return done(6);
  }
  if (setup.request_type == kDfuIn && setup.request == kDfuGetState && !data.empty()) {
    data[0] = dfu_state_;
    return done(1);
  }
  if (setup.request_type == kDfuIn && setup.request == kDfuUpload) {
    const size_t at = size_t{setup.value} * kDfuBlockBytes;
    if (at >= download_.size()) return done(0);
    const size_t n = std::min({data.size(), kDfuBlockBytes, download_.size() - at});
    std::memcpy(data.data(), download_.data() + at, n);
    return done(n);
  }
  if (setup.request_type == kDfuOut &&
      (setup.request == kDfuClrStatus || setup.request == kDfuAbort)) {
    dfu_error_ = false;
    dfu_state_ = kDfuIdle;
    download_.clear();
    download_complete_ = false;
    return done();
  }
  if (setup.request_type == kDfuOut && setup.request == kDfuDetach) return done();
  return stalled();
}

ControlResult VirtualStick::app_control(const Setup& setup, std::span<uint8_t> data) {
  const bool is_csr = (setup.request_type == kVendorIn || setup.request_type == kVendorOut) &&
                      (setup.request == kCsr32 || setup.request == kCsr64);
  if (!is_csr) return stalled();
  const size_t width = setup.request == kCsr32 ? 4 : 8;
  if (data.size() != width) return stalled();
  const uint32_t address = setup.value | (uint32_t{setup.index} << 16);
  if (setup.request_type == kVendorIn) {
    const uint64_t value = read_register(address);
    for (size_t i = 0; i < width; ++i) data[i] = static_cast<uint8_t>(value >> (8 * i));
    return done(width);
  }
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i) value |= uint64_t{data[i]} << (8 * i);
  write_register(address, value);
  return done();
}

uint64_t VirtualStick::read_register(uint32_t address) const {
  const auto it = registers_.find(address);
  return it == registers_.end() ? 0 : it->second;
}

void VirtualStick::write_register(uint32_t address, uint64_t value) {
  if (address == reg::kScuCtrl3) {
    // cur_pwr_state follows rg_force_sleep: 3 (reset) reads 2, 2 (run) reads 0.
    const uint32_t sleep = force_sleep(value);
    uint64_t state = (read_register(address) >> kPowerStateShift) & 3;
    if (sleep == kForceSleepReset) state = kPowerStateReset;
    if (sleep == kForceSleepRun) state = kPowerStateRun;
    const bool entering_reset =
        sleep == kForceSleepReset && force_sleep(read_register(address)) != kForceSleepReset;
    registers_[address] =
        (value & ~(uint64_t{3} << kPowerStateShift)) | (state << kPowerStateShift);
    if (entering_reset) reset_chip();
    return;
  }
  if (address == reg::kUsbFatalErrIntStatus) {  // write-0-to-clear
    registers_[address] = read_register(address) & value;
    return;
  }
  registers_[address] = value;
}

bool VirtualStick::running() const {
  if (force_sleep(read_register(reg::kScuCtrl3)) != kForceSleepRun) return false;
  if (read_register(reg::kMultiBoEp) != 0) return false;
  for (uint32_t r : reg::kScalarRunControls)
    if (read_register(r) != 1) return false;
  for (uint32_t r : reg::kTileRunControls)
    if (read_register(r) != 1) return false;
  return true;
}

void VirtualStick::reset_chip() {
  chip_.reset();
  ++chip_resets_;
  for (uint32_t r : reg::kScalarRunControls) registers_[r] = 0;
  for (uint32_t r : reg::kTileRunControls) registers_[r] = 0;
  registers_[reg::kHibErrorStatus] = 0;
  header_.clear();
  payload_.clear();
  in_payload_ = false;
  program_hung_ = false;
  fatal_raised_ = false;
  chip_fault_.clear();  // the fault was the chip's that was just reset
  outputs_.clear();
  output_sent_ = 0;
  events_.clear();
  interrupts_.clear();
}

void VirtualStick::port_reset() {
  std::lock_guard lock(mutex_);
  if (wedged_) {  // a port reset on a wedged stick makes it vanish until replugged
    faults_.off_bus = true;
    return;
  }
  if (mode_ == Mode::kBootloader) {
    if (download_complete_ && !dfu_error_) {
      firmware_ = download_;
      mode_ = Mode::kApplication;
    }
  }
  reset_registers();
  reset_chip();
}

void VirtualStick::replug() {
  std::lock_guard lock(mutex_);
  mode_ = Mode::kBootloader;
  wedged_ = false;
  faults_.off_bus = false;
  faults_.wedge_firmware = false;
  download_.clear();
  download_complete_ = false;
  dfu_error_ = false;
  dfu_state_ = kDfuIdle;
  reset_registers();
  reset_chip();
}

// ---- bulk transfers ----

TransferStatus VirtualStick::bulk_out(uint8_t endpoint, std::span<const uint8_t> data) {
  std::lock_guard lock(mutex_);
  if (faults_.off_bus) return TransferStatus::kNoDevice;
  if (faults_.wedge_firmware) wedged_ = true;
  if (wedged_) return TransferStatus::kTimedOut;
  if (mode_ != Mode::kApplication) return TransferStatus::kStalled;
  if (faults_.stall_bulk_transfers > 0) {
    --faults_.stall_bulk_transfers;
    return TransferStatus::kStalled;
  }
  if (endpoint != kEpBulkOut) {
    violation(cat("bulk OUT on endpoint 0x", std::hex, int(endpoint),
                  " in single-endpoint mode (only 0x01 carries data)"));
    return TransferStatus::kStalled;
  }
  if (!outputs_.empty()) {
    size_t unread = 0;
    for (const auto& o : outputs_) unread += o.size();
    violation(cat("deadlock rule: a bulk OUT of ", data.size(), " bytes started while ",
                  unread - output_sent_, " output bytes on EP 0x81 were unread"));
    if (faults_.wedge_on_deadlock) {
      wedged_ = true;
      return TransferStatus::kTimedOut;
    }
  }
  size_t at = 0;
  while (at < data.size()) {
    if (!in_payload_) {
      const size_t n = std::min(kBulkHeaderBytes - header_.size(), data.size() - at);
      header_.insert(header_.end(), data.begin() + at, data.begin() + at + n);
      at += n;
      if (header_.size() < kBulkHeaderBytes) break;
      dma_length_ = uint32_t{header_[0]} | uint32_t{header_[1]} << 8 | uint32_t{header_[2]} << 16 |
                    uint32_t{header_[3]} << 24;
      dma_tag_ = header_[4] & 0xF;
      if (dma_tag_ > 2 || header_[5] != 0 || header_[6] != 0 || header_[7] != 0)
        violation(cat("framing: header with tag ", int(header_[4]), " and padding ",
                      int(header_[5]), ",", int(header_[6]), ",", int(header_[7])));
      if (dma_length_ == 0) violation("framing: a DMA of length 0");
      header_.clear();
      payload_.clear();
      payload_.reserve(dma_length_);
      in_payload_ = true;
      if (dma_length_ == 0) {
        in_payload_ = false;
        continue;
      }
    }
    const size_t n = std::min<size_t>(dma_length_ - payload_.size(), data.size() - at);
    payload_.insert(payload_.end(), data.begin() + at, data.begin() + at + n);
    at += n;
    if (payload_.size() == dma_length_) {
      in_payload_ = false;
      if (at < data.size())
        violation(cat("framing: one bulk transfer carries the end of a ", dma_length_,
                      "-byte DMA and ", data.size() - at, " bytes of the next one"));
      deliver_dma();
    }
  }
  return TransferStatus::kDone;
}

void VirtualStick::deliver_dma() {
  const uint8_t tag = dma_tag_;
  if (!running()) {
    violation(cat("a DMA (tag ", int(tag), ", ", payload_.size(),
                  " bytes) arrived while the chip is not running (open sequence incomplete)"));
    return;
  }
  if (program_hung_) return;  // a hung program pulls nothing more
  if (tag == 0) {
    ++programs_started_;
    if (faults_.hang_next_program) {
      faults_.hang_next_program = false;
      program_hung_ = true;
      return;
    }
    if (faults_.fatal_next_program) {
      faults_.fatal_next_program = false;
      program_hung_ = true;
      registers_[reg::kHibErrorStatus] = kHibErrorOnFault;
      registers_[reg::kUsbFatalErrIntStatus] = 1;
      interrupts_.push_back(1);
      return;
    }
  }
  if (tag > 2) return;
  chip_.receive(static_cast<chip::DmaTag>(tag), payload_);
  collect_chip_results();
}

void VirtualStick::collect_chip_results() {
  const chip::RunState state = chip_.advance();
  while (auto output = chip_.take_output()) {
    std::vector<uint8_t> bytes = std::move(*output);
    if (faults_.output_byte_delta != 0) {
      const long size = static_cast<long>(bytes.size()) + faults_.output_byte_delta;
      bytes.resize(static_cast<size_t>(std::max(0L, size)), 0xEE);
      faults_.output_byte_delta = 0;
    }
    if (faults_.split_outputs && bytes.size() > 1) {
      const auto half = bytes.begin() + static_cast<long>(bytes.size() / 2);
      outputs_.emplace_back(bytes.begin(), half);
      outputs_.emplace_back(half, bytes.end());
    } else if (!bytes.empty()) {
      outputs_.push_back(std::move(bytes));
    }
  }
  const uint64_t reported = read_register(reg::kDescrEp);
  while (auto event = chip_.take_event()) {
    if (!(reported >> (event->tag & 0xF) & 1)) continue;
    std::vector<uint8_t> record(kEventBytes, 0);
    for (int i = 0; i < 8; ++i) record[i] = static_cast<uint8_t>(event->address >> (8 * i));
    for (int i = 0; i < 4; ++i) record[8 + i] = static_cast<uint8_t>(event->length >> (8 * i));
    record[12] = event->tag & 0xF;
    events_.push_back(std::move(record));
  }
  if (state == chip::RunState::kFaulted && !fatal_raised_) {
    fatal_raised_ = true;
    chip_fault_ = chip_.fault();
    registers_[reg::kHibErrorStatus] = kHibErrorOnFault;
    registers_[reg::kUsbFatalErrIntStatus] = 1;
    interrupts_.push_back(1);
  }
}

std::optional<VirtualStick::InResult> VirtualStick::bulk_in(uint8_t endpoint,
                                                            std::span<uint8_t> buffer) {
  std::lock_guard lock(mutex_);
  if (faults_.off_bus) return InResult{TransferStatus::kNoDevice, 0};
  if (wedged_ || faults_.wedge_firmware) return std::nullopt;
  if (mode_ != Mode::kApplication) return InResult{TransferStatus::kStalled, 0};
  if (endpoint == kEpOutput) {
    if (outputs_.empty()) return std::nullopt;
    if (faults_.stall_bulk_transfers > 0) {
      --faults_.stall_bulk_transfers;
      return InResult{TransferStatus::kStalled, 0};
    }
    const std::vector<uint8_t>& front = outputs_.front();
    const size_t n = std::min(buffer.size(), front.size() - output_sent_);
    std::memcpy(buffer.data(), front.data() + output_sent_, n);
    output_sent_ += n;
    if (output_sent_ == front.size()) {  // the device DMA ends: a short packet ends the transfer
      outputs_.pop_front();
      output_sent_ = 0;
    }
    return InResult{TransferStatus::kDone, n};
  }
  if (endpoint == kEpEvent) {
    if (events_.empty()) return std::nullopt;
    if (buffer.size() < kEventBytes) return InResult{TransferStatus::kError, 0};  // overflow
    std::memcpy(buffer.data(), events_.front().data(), kEventBytes);
    events_.pop_front();
    return InResult{TransferStatus::kDone, kEventBytes};
  }
  if (endpoint == kEpInterrupt) {
    if (interrupts_.empty()) return std::nullopt;
    if (buffer.size() < kInterruptBytes) return InResult{TransferStatus::kError, 0};
    const uint32_t word = interrupts_.front();
    interrupts_.pop_front();
    for (size_t i = 0; i < kInterruptBytes; ++i) buffer[i] = static_cast<uint8_t>(word >> (8 * i));
    return InResult{TransferStatus::kDone, kInterruptBytes};
  }
  return InResult{TransferStatus::kStalled, 0};
}

}  // namespace tinycoral::usb
