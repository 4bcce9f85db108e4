// libusb-1.0 transport: discovery in both USB states, DFU bring-up, async bulk transfers with our
// own deadlines (libusb's per-transfer timeout stays 0; a late transfer is cancelled by the
// caller).
#include "usb/libusb_transport.h"

#include <libusb-1.0/libusb.h>

#include <algorithm>
#include <thread>

#include "common/error.h"
#include "usb/dfu.h"
#include "usb/firmware.h"
#include "usb/protocol.h"

namespace tinycoral::usb {
namespace {

constexpr int kClaimAttempts = 50;  // another process may just be releasing the stick
constexpr Millis kClaimRetryDelay{100};
constexpr Millis kReappearPoll{50};

TransferStatus status_from_libusb(int code) {
  switch (code) {
    case LIBUSB_ERROR_TIMEOUT:
      return TransferStatus::kTimedOut;
    case LIBUSB_ERROR_PIPE:
      return TransferStatus::kStalled;
    case LIBUSB_ERROR_NO_DEVICE:
      return TransferStatus::kNoDevice;
    default:
      return TransferStatus::kError;
  }
}

TransferStatus status_from_transfer(libusb_transfer_status status) {
  switch (status) {
    case LIBUSB_TRANSFER_COMPLETED:
      return TransferStatus::kDone;
    case LIBUSB_TRANSFER_TIMED_OUT:
      return TransferStatus::kTimedOut;
    case LIBUSB_TRANSFER_STALL:
      return TransferStatus::kStalled;
    case LIBUSB_TRANSFER_NO_DEVICE:
      return TransferStatus::kNoDevice;
    case LIBUSB_TRANSFER_CANCELLED:
      return TransferStatus::kCancelled;
    default:
      return TransferStatus::kError;
  }
}

// A libusb context that ends with its scope.
struct Context {
  libusb_context* ctx = nullptr;
  Context() {
    const int rc = libusb_init(&ctx);
    if (rc != 0) fail("libusb could not start: ", libusb_error_name(rc));
  }
  ~Context() {
    if (ctx) libusb_exit(ctx);
  }
  libusb_context* release() { return std::exchange(ctx, nullptr); }
};

std::string port_path_of(libusb_device* device) {
  uint8_t ports[8];
  const int n = libusb_get_port_numbers(device, ports, sizeof ports);
  std::string path = std::to_string(libusb_get_bus_number(device));
  for (int i = 0; i < n; ++i) path += (i == 0 ? "-" : ".") + std::to_string(ports[i]);
  return path;
}

bool is_stick(uint16_t vid, uint16_t pid) {
  return (vid == kDfuVendorId && pid == kDfuProductId) ||
         (vid == kAppVendorId && pid == kAppProductId);
}

std::vector<UsbStickInfo> scan(libusb_context* ctx) {
  libusb_device** list = nullptr;
  const ssize_t n = libusb_get_device_list(ctx, &list);
  std::vector<UsbStickInfo> sticks;
  for (ssize_t i = 0; i < n; ++i) {
    libusb_device_descriptor desc{};
    if (libusb_get_device_descriptor(list[i], &desc) != 0) continue;
    if (!is_stick(desc.idVendor, desc.idProduct)) continue;
    UsbStickInfo info;
    info.bus = libusb_get_bus_number(list[i]);
    info.port_path = port_path_of(list[i]);
    info.vendor_id = desc.idVendor;
    info.product_id = desc.idProduct;
    sticks.push_back(info);
  }
  if (list) libusb_free_device_list(list, 1);
  std::sort(sticks.begin(), sticks.end(),
            [](const auto& a, const auto& b) { return a.port_path < b.port_path; });
  for (size_t i = 0; i < sticks.size(); ++i) sticks[i].index = static_cast<int>(i);
  return sticks;
}

LinkSpeed speed_of(libusb_device* device) {
  switch (libusb_get_device_speed(device)) {
    case LIBUSB_SPEED_LOW:
      return LinkSpeed::kLow;
    case LIBUSB_SPEED_FULL:
      return LinkSpeed::kFull;
    case LIBUSB_SPEED_HIGH:
      return LinkSpeed::kHigh;
    case LIBUSB_SPEED_SUPER:
    case LIBUSB_SPEED_SUPER_PLUS:
      return LinkSpeed::kSuper;
    default:
      return LinkSpeed::kUnknown;
  }
}

}  // namespace

bool UsbStickInfo::bootloader() const {
  return vendor_id == kDfuVendorId && product_id == kDfuProductId;
}
std::string UsbStickInfo::state() const {
  return bootloader() ? "bootloader (firmware not loaded yet)" : "ready (firmware running)";
}

std::vector<UsbStickInfo> list_usb_sticks() {
  Context context;
  return scan(context.ctx);
}

struct LibusbTransport::InFlight {
  LibusbTransport* owner = nullptr;
  Transfer* transfer = nullptr;
  libusb_transfer* usb = nullptr;
};

LibusbTransport::~LibusbTransport() {
  cancel_all(Millis(1000));
  if (handle_) {
    if (interface_ >= 0) libusb_release_interface(handle_, interface_);
    libusb_close(handle_);
  }
  if (context_) libusb_exit(context_);
}

std::unique_ptr<LibusbTransport> LibusbTransport::open_device(const UsbStickInfo& info,
                                                              int interface) {
  Context context;
  libusb_device** list = nullptr;
  const ssize_t n = libusb_get_device_list(context.ctx, &list);
  libusb_device* found = nullptr;
  for (ssize_t i = 0; i < n && !found; ++i) {
    libusb_device_descriptor desc{};
    if (libusb_get_device_descriptor(list[i], &desc) != 0) continue;
    if (desc.idVendor == info.vendor_id && desc.idProduct == info.product_id &&
        port_path_of(list[i]) == info.port_path)
      found = list[i];
  }
  std::unique_ptr<LibusbTransport> t(new LibusbTransport());
  t->info_ = info;
  const std::string name =
      cat("usb ", info.port_path, " (", std::hex, info.vendor_id, ":", info.product_id, ")");
  t->description_ = name;
  if (!found) {
    if (list) libusb_free_device_list(list, 1);
    fail("the stick at ", name, " is gone (unplugged, or re-enumerating)");
  }
  t->speed_ = speed_of(found);
  const int rc = libusb_open(found, &t->handle_);
  libusb_free_device_list(list, 1);
  t->context_ = context.release();
  if (rc != 0)
    fail("cannot open ", name, ": ", libusb_error_name(rc),
         rc == LIBUSB_ERROR_ACCESS
             ? " (install the udev rule udev/99-tinycoral.rules, then replug; "
               "see docs/driver.md)"
             : "");
  int claim = LIBUSB_ERROR_BUSY;
  for (int i = 0; i < kClaimAttempts; ++i) {
    claim = libusb_claim_interface(t->handle_, interface);
    if (claim != LIBUSB_ERROR_BUSY) break;
    std::this_thread::sleep_for(kClaimRetryDelay);
  }
  if (claim != 0)
    fail("cannot claim interface ", interface, " of ", name, ": ", libusb_error_name(claim),
         claim == LIBUSB_ERROR_BUSY ? " (another program is using the stick)" : "");
  t->interface_ = interface;
  return t;
}

std::unique_ptr<LibusbTransport> LibusbTransport::open(int index, const UsbOpenOptions& options) {
  std::vector<UsbStickInfo> sticks = list_usb_sticks();
  if (sticks.empty())
    fail(
        "no Coral USB Accelerator found (looked for 1a6e:089a and 18d1:9302); "
        "check the cable and `lsusb`");
  const size_t pick = index < 0 ? 0 : static_cast<size_t>(index);
  if (pick >= sticks.size())
    fail("usb:", index, " does not exist: ", sticks.size(),
         " stick(s) found (usb:0..usb:", sticks.size() - 1, ")");
  return open(sticks[pick], options);
}

std::unique_ptr<LibusbTransport> LibusbTransport::open(const UsbStickInfo& chosen,
                                                       const UsbOpenOptions& options) {
  UsbStickInfo info = chosen;
  if (info.bootloader()) {
    if (!options.allow_dfu) fail("the stick at ", info.port_path, " is in bootloader mode");
    const std::vector<uint8_t> firmware = load_firmware(options.firmware);
    {
      auto dfu = open_device(info, 0);
      with_context(cat("DFU firmware upload to ", info.port_path),
                   [&] { dfu_download(*dfu, firmware, options.control_timeout); });
      dfu->reset_port();
    }
    // Wait for the stick to come back in application mode at the same port.
    const auto deadline = Clock::now() + options.reappear_timeout;
    bool back = false;
    while (!back && Clock::now() < deadline) {
      std::this_thread::sleep_for(kReappearPoll);
      for (const UsbStickInfo& s : list_usb_sticks()) {
        if (s.port_path == info.port_path && !s.bootloader()) {
          info = s;
          back = true;
        }
      }
    }
    if (!back)
      fail("the stick at ", info.port_path, " did not come back in application mode within ",
           options.reappear_timeout.count(), " ms after the firmware upload; unplug and replug it");
  }
  return open_device(info, 0);
}

void LibusbTransport::reset_port() {
  if (!handle_) return;
  cancel_all(Millis(1000));
  // The stick re-enumerates: libusb may report it as gone, which is the expected outcome.
  libusb_reset_device(handle_);
}

ControlResult LibusbTransport::do_control(const Setup& setup, std::span<uint8_t> data,
                                          Millis timeout) {
  const int rc = libusb_control_transfer(
      handle_, setup.request_type, setup.request, setup.value, setup.index, data.data(),
      static_cast<uint16_t>(data.size()), static_cast<unsigned>(timeout.count()));
  if (rc < 0) return ControlResult{status_from_libusb(rc), 0, libusb_error_name(rc)};
  return ControlResult{TransferStatus::kDone, static_cast<size_t>(rc), {}};
}

void LibusbTransport::on_complete(libusb_transfer* usb) {
  auto* flight = static_cast<InFlight*>(usb->user_data);
  LibusbTransport* self = flight->owner;
  Transfer& t = *flight->transfer;
  t.actual = static_cast<size_t>(usb->actual_length);
  t.status = status_from_transfer(usb->status);
  if (t.status == TransferStatus::kError)
    t.error = cat("libusb transfer status ", int(usb->status));
  t.impl = nullptr;
  ++self->finished_;
  self->count_finished(t);
  self->in_flight_.erase(std::find(self->in_flight_.begin(), self->in_flight_.end(), flight));
  libusb_free_transfer(usb);
  delete flight;
}

void LibusbTransport::do_submit(Transfer& transfer) {
  libusb_transfer* usb = libusb_alloc_transfer(0);
  if (!usb) {
    transfer.status = TransferStatus::kError;
    transfer.error = "out of memory";
    ++finished_;
    return;
  }
  auto* flight = new InFlight{this, &transfer, usb};
  const unsigned char type = transfer.endpoint == kEpInterrupt ? LIBUSB_TRANSFER_TYPE_INTERRUPT
                                                               : LIBUSB_TRANSFER_TYPE_BULK;
  usb->dev_handle = handle_;
  usb->endpoint = transfer.endpoint;
  usb->type = type;
  usb->timeout = 0;
  usb->buffer = transfer.data;
  usb->length = static_cast<int>(transfer.length);
  usb->callback = &LibusbTransport::on_complete;
  usb->user_data = flight;
  // An OUT must move every byte; a short IN is normal (it ends a device DMA).
  usb->flags = transfer.is_in() ? 0 : LIBUSB_TRANSFER_SHORT_NOT_OK;
  const int rc = libusb_submit_transfer(usb);
  if (rc != 0) {
    libusb_free_transfer(usb);
    delete flight;
    transfer.status = status_from_libusb(rc);
    transfer.error = libusb_error_name(rc);
    ++finished_;
    return;
  }
  transfer.impl = flight;
  in_flight_.push_back(flight);
}

bool LibusbTransport::wait_any(Clock::time_point deadline) {
  for (;;) {
    if (finished_ != reported_) {
      reported_ = finished_;
      return true;
    }
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) return false;
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
        std::min<Clock::duration>(left, Millis(100)));
    timeval tv{static_cast<time_t>(us.count() / 1000000),
               static_cast<suseconds_t>(us.count() % 1000000)};
    const int rc = libusb_handle_events_timeout_completed(context_, &tv, nullptr);
    if (rc != 0 && rc != LIBUSB_ERROR_INTERRUPTED && rc != LIBUSB_ERROR_TIMEOUT) return false;
  }
}

void LibusbTransport::cancel(Transfer& transfer) {
  if (transfer.status != TransferStatus::kPending || !transfer.impl) return;
  libusb_cancel_transfer(static_cast<InFlight*>(transfer.impl)->usb);
}

void LibusbTransport::cancel_all(Millis timeout) {
  for (InFlight* f : in_flight_) libusb_cancel_transfer(f->usb);
  const auto deadline = Clock::now() + timeout;
  while (!in_flight_.empty() && Clock::now() < deadline) {
    timeval tv{0, 50000};
    libusb_handle_events_timeout_completed(context_, &tv, nullptr);
  }
  // Anything libusb never gave back is abandoned: mark it so callers may free their buffers'
  // owners.
  for (InFlight* f : in_flight_) f->transfer->status = TransferStatus::kCancelled;
}

}  // namespace tinycoral::usb
