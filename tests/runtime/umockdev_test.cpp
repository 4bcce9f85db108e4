// The real libusb code path, URBs and all, against the virtual stick: the test re-runs itself under
// umockdev-wrapper (an LD_PRELOAD sandbox that fakes /sys and /dev), publishes the virtual stick as
// a USB device there, and answers the usbdevfs ioctls libusb issues (SUBMITURB, REAPURB,
// DISCARDURB, ...) from the VirtualStick state machine on a helper thread. Two steps, because
// re-enumeration from 1a6e:089a to 18d1:9302 cannot be emulated without hotplug events reaching
// libusb: (1) DFU upload to a bootloader-mode stick over libusb, then a port reset; (2) an
// application-mode stick: open sequence, register reads and writes, an inference, close.
// Skips with a message when umockdev is not installed (or was not found at configure time).
// STATUS: unfinished, opt-in only (TINYCORAL_UMOCKDEV_TEST=1); see run_inside_umockdev().
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>

#ifdef TINYCORAL_HAVE_UMOCKDEV
#include <linux/ioctl.h>
#include <linux/usbdevice_fs.h>
#include <umockdev.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include "runtime/edgetpu.h"
#include "usb/csr.h"
#include "usb/dfu.h"
#include "usb/fake_chip.h"
#include "usb/libusb_transport.h"
#include "usb/protocol.h"
#include "usb/test_programs.h"
#include "usb/virtual_stick.h"
#endif

namespace {

#ifdef TINYCORAL_HAVE_UMOCKDEV
using namespace tinycoral;
using namespace tinycoral::usb;

// One URB held by the responder until the stick can finish it.
struct PendingUrb {
  UMockdevIoctlData* urb = nullptr;     // the client's struct usbdevfs_urb
  UMockdevIoctlData* buffer = nullptr;  // its data buffer
};

// Answers usbdevfs ioctls for one device node from a VirtualStick.
struct Responder {
  VirtualStick* stick = nullptr;
  std::mutex mutex;
  std::deque<PendingUrb> pending_in;   // in submission order (all IN endpoints)
  std::deque<PendingUrb> pending_out;  // OUTs a wedged stick never takes
  std::deque<PendingUrb> finished;
  std::atomic<int> urbs{0};

  static usbdevfs_urb* urb_of(const PendingUrb& p) {
    return reinterpret_cast<usbdevfs_urb*>(p.urb->data);
  }
  void finish(PendingUrb p, int status, int actual) {
    // Only these two fields: the buffer pointer in the local copy is the responder's, not libusb's.
    umockdev_ioctl_data_update(p.urb, offsetof(usbdevfs_urb, status),
                               reinterpret_cast<guint8*>(&status), sizeof status);
    umockdev_ioctl_data_update(p.urb, offsetof(usbdevfs_urb, actual_length),
                               reinterpret_cast<guint8*>(&actual), sizeof actual);
    finished.push_back(p);
  }
  void pump() {
    for (auto it = pending_in.begin(); it != pending_in.end();) {
      usbdevfs_urb* u = urb_of(*it);
      std::vector<uint8_t> data(size_t(u->buffer_length));
      const auto result = stick->bulk_in(u->endpoint, data);
      if (!result) {
        ++it;
        continue;
      }
      if (result->actual)
        umockdev_ioctl_data_update(it->buffer, 0, data.data(), int(result->actual));
      const int status = result->status == TransferStatus::kDone      ? 0
                         : result->status == TransferStatus::kStalled ? -EPIPE
                                                                      : -ENODEV;
      finish(*it, status, int(result->actual));
      it = pending_in.erase(it);
    }
  }
  int submit(UMockdevIoctlData* arg) {
    GError* error = nullptr;
    UMockdevIoctlData* urb_data = umockdev_ioctl_data_resolve(arg, 0, sizeof(usbdevfs_urb), &error);
    if (!urb_data) return -EINVAL;
    auto* u = reinterpret_cast<usbdevfs_urb*>(urb_data->data);
    UMockdevIoctlData* buffer = umockdev_ioctl_data_resolve(
        urb_data, offsetof(usbdevfs_urb, buffer), size_t(u->buffer_length), &error);
    if (!buffer) return -EINVAL;
    PendingUrb p{umockdev_ioctl_data_ref(urb_data), buffer};
    ++urbs;
    if (u->type == USBDEVFS_URB_TYPE_CONTROL) {
      // The buffer holds the 8-byte setup packet, then the data stage.
      const uint8_t* s = buffer->data;
      const Setup setup{s[0], s[1], uint16_t(s[2] | s[3] << 8), uint16_t(s[4] | s[5] << 8)};
      const size_t length = size_t(s[6] | s[7] << 8);
      std::vector<uint8_t> data(buffer->data + 8, buffer->data + 8 + length);
      const ControlResult r = stick->control(setup, data);
      if (r.status == TransferStatus::kTimedOut) {
        pending_out.push_back(p);  // never answered; libusb times out and discards it
      } else if (r.status != TransferStatus::kDone) {
        finish(p, r.status == TransferStatus::kStalled ? -EPIPE : -ENODEV, 0);
      } else {
        if (setup.request_type & 0x80)
          umockdev_ioctl_data_update(buffer, 8, data.data(), int(r.actual));
        finish(p, 0, int((setup.request_type & 0x80) ? r.actual : length));
      }
    } else if (u->endpoint & 0x80) {
      pending_in.push_back(p);
    } else {
      const TransferStatus s = stick->bulk_out(
          u->endpoint, std::span<const uint8_t>(buffer->data, size_t(u->buffer_length)));
      if (s == TransferStatus::kTimedOut)
        pending_out.push_back(p);
      else
        finish(p,
               s == TransferStatus::kDone      ? 0
               : s == TransferStatus::kStalled ? -EPIPE
                                               : -ENODEV,
               s == TransferStatus::kDone ? u->buffer_length : 0);
    }
    pump();
    return 0;
  }
  bool discard(gulong client_urb) {
    for (auto* queue : {&pending_in, &pending_out}) {
      for (auto it = queue->begin(); it != queue->end(); ++it) {
        if (it->urb->client_addr == client_urb) {
          finish(*it, -ENOENT, 0);
          queue->erase(it);
          return true;
        }
      }
    }
    return false;
  }
};

gboolean handle_ioctl(UMockdevIoctlBase*, UMockdevIoctlClient* client, gpointer user) {
  auto* r = static_cast<Responder*>(user);
  std::lock_guard lock(r->mutex);
  const gulong request = umockdev_ioctl_client_get_request(client);
  UMockdevIoctlData* arg = umockdev_ioctl_client_get_arg(client);
  GError* error = nullptr;
  switch (request) {
    case USBDEVFS_GET_CAPABILITIES: {
      UMockdevIoctlData* d = umockdev_ioctl_data_resolve(arg, 0, sizeof(uint32_t), &error);
      const uint32_t caps = USBDEVFS_CAP_BULK_CONTINUATION | USBDEVFS_CAP_NO_PACKET_SIZE_LIM |
                            USBDEVFS_CAP_ZERO_PACKET;
      umockdev_ioctl_data_update(d, 0, (guint8*)&caps, sizeof caps);
      umockdev_ioctl_client_complete(client, 0, 0);
      return TRUE;
    }
    case USBDEVFS_CLAIMINTERFACE:
    case USBDEVFS_RELEASEINTERFACE:
    case USBDEVFS_CLEAR_HALT:
    case USBDEVFS_SETINTERFACE:
    case USBDEVFS_SETCONFIGURATION:
      umockdev_ioctl_client_complete(client, 0, 0);
      return TRUE;
    case USBDEVFS_RESET:
      r->stick->port_reset();
      umockdev_ioctl_client_complete(client, 0, 0);
      return TRUE;
    case USBDEVFS_SUBMITURB: {
      const int rc = r->submit(arg);
      umockdev_ioctl_client_complete(client, rc == 0 ? 0 : -1, rc == 0 ? 0 : -rc);
      return TRUE;
    }
    case USBDEVFS_DISCARDURB: {
      const bool found = r->discard(arg->client_addr);
      umockdev_ioctl_client_complete(client, found ? 0 : -1, found ? 0 : EINVAL);
      return TRUE;
    }
    case USBDEVFS_REAPURB:
    case USBDEVFS_REAPURBNDELAY: {
      r->pump();
      if (r->finished.empty()) {
        umockdev_ioctl_client_complete(client, -1, EAGAIN);
        return TRUE;
      }
      PendingUrb p = r->finished.front();
      r->finished.pop_front();
      umockdev_ioctl_data_set_ptr(arg, 0, p.urb);
      umockdev_ioctl_client_complete(client, 0, 0);
      umockdev_ioctl_data_unref(p.urb);
      return TRUE;
    }
    default:
      return FALSE;
  }
}

std::string hex(const std::vector<uint8_t>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

// A testbed with one virtual stick at bus 1, port `port`, served by a helper thread.
class MockedStick {
 public:
  MockedStick(VirtualStick& stick, int port) {
    responder_.stick = &stick;
    testbed_ = umockdev_testbed_new();
    const std::string dev = "bus/usb/001/00" + std::to_string(port + 1);
    std::vector<uint8_t> descriptors = stick.device_descriptor();
    const auto config = stick.config_descriptor();
    descriptors.insert(descriptors.end(), config.begin(), config.end());
    const std::string sysfs = "P: /devices/pci0000:00/0000:00:14.0/usb1/1-" + std::to_string(port) +
                              "\nN: " + dev + "\nE: DEVNAME=/dev/" + dev +
                              "\nE: SUBSYSTEM=usb\nE: DEVTYPE=usb_device\n"
                              "E: BUSNUM=001\nE: DEVNUM=00" +
                              std::to_string(port + 1) +
                              "\nA: busnum=1\nA: devnum=" + std::to_string(port + 1) +
                              "\nA: speed=480\nH: descriptors=" + hex(descriptors) + "\n";
    GError* error = nullptr;
    if (!umockdev_testbed_add_from_string(testbed_, sysfs.c_str(), &error))
      ADD_FAILURE() << "umockdev_testbed_add_from_string: " << (error ? error->message : "?");
    node_ = "/dev/" + dev;
    std::promise<void> ready;
    auto attached = ready.get_future();
    thread_ = std::thread([this, &ready] {
      context_ = g_main_context_new();
      g_main_context_push_thread_default(context_);
      handler_ = umockdev_ioctl_base_new();
      g_signal_connect(handler_, "handle-ioctl", G_CALLBACK(handle_ioctl), &responder_);
      GError* err = nullptr;
      if (!umockdev_testbed_attach_ioctl(testbed_, node_.c_str(), handler_, &err))
        ADD_FAILURE() << "attach_ioctl: " << (err ? err->message : "?");
      ready.set_value();
      while (!stop_)
        g_main_context_iteration(context_, FALSE),
            std::this_thread::sleep_for(std::chrono::microseconds(50));
      umockdev_testbed_detach_ioctl(testbed_, node_.c_str(), nullptr);
      g_object_unref(handler_);
      g_main_context_pop_thread_default(context_);
      g_main_context_unref(context_);
    });
    attached.wait();
  }
  ~MockedStick() {
    stop_ = true;
    thread_.join();
    g_object_unref(testbed_);
  }
  int urbs() const { return responder_.urbs; }

 private:
  Responder responder_;
  UMockdevTestbed* testbed_ = nullptr;
  UMockdevIoctlBase* handler_ = nullptr;
  GMainContext* context_ = nullptr;
  std::string node_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
};
#endif

// Set by run_inside_umockdev() for the child it starts under umockdev-wrapper.
bool in_mock_environment() {
  const char* child = std::getenv("TINYCORAL_UMOCKDEV_CHILD");
  return child && std::string(child) == "1";
}

// Outside the sandbox: run this test again inside it.
void run_inside_umockdev(const std::string& filter) {
#ifndef TINYCORAL_HAVE_UMOCKDEV
  GTEST_SKIP() << "built without umockdev (install libumockdev-dev and umockdev, re-run cmake)";
#else
  // Unfinished: libusb finds, opens and claims the mocked stick, but crashes reaping the first
  // control URB (the REAPURB pointer hand-back is still wrong). Opt in while working on it.
  const char* opt_in = std::getenv("TINYCORAL_UMOCKDEV_TEST");
  if (!opt_in || std::string(opt_in) != "1")
    GTEST_SKIP() << "the umockdev responder is unfinished (libusb crashes reaping the first URB; "
                    "see docs/driver.md); set TINYCORAL_UMOCKDEV_TEST=1 to run it";
  if (std::system("command -v umockdev-wrapper > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "umockdev-wrapper is not installed (Debian package umockdev)";
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string out = std::filesystem::temp_directory_path() /
                          ("tinycoral-umockdev-" + std::to_string(::getpid()) + ".log");
  const std::string cmd = "TINYCORAL_UMOCKDEV_CHILD=1 timeout 60 umockdev-wrapper '" + self +
                          "' --gtest_filter='" + filter + "' > '" + out + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream log(out);
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  std::filesystem::remove(out);
  EXPECT_EQ(rc, 0) << text;
#endif
}

}  // namespace

TEST(Umockdev, DfuUploadOverLibusb) {
  if (!in_mock_environment()) return run_inside_umockdev("Umockdev.DfuUploadOverLibusb");
#ifdef TINYCORAL_HAVE_UMOCKDEV
  tinycoral::testing::FakeChip chip;
  VirtualStick stick(chip);
  MockedStick mocked(stick, 1);
  const auto sticks = list_usb_sticks();
  ASSERT_EQ(sticks.size(), 1u);
  EXPECT_TRUE(sticks[0].bootloader());
  std::vector<uint8_t> image(10783);
  std::mt19937 rng(1);
  for (auto& b : image) b = uint8_t(rng());
  {
    auto dfu = LibusbTransport::open_device(sticks[0], 0);
    dfu_download(*dfu, image, Millis(2000));
    dfu->reset_port();
  }
  EXPECT_EQ(stick.mode(), VirtualStick::Mode::kApplication);
  EXPECT_EQ(stick.firmware(), image);
  EXPECT_GT(mocked.urbs(), 100);
#endif
}

TEST(Umockdev, InferenceOverLibusb) {
  if (!in_mock_environment()) return run_inside_umockdev("Umockdev.InferenceOverLibusb");
#ifdef TINYCORAL_HAVE_UMOCKDEV
  tinycoral::testing::FakeChip chip;
  VirtualStick stick(chip, VirtualStick::Mode::kApplication);
  MockedStick mocked(stick, 2);
  auto transport = LibusbTransport::open(0, {});
  Csr csr(*transport, Millis(2000));
  EXPECT_EQ(csr.read32(reg::kScuCtrl0), 0x941u);
  csr.write64(reg::kTileConfig0, 0x7F);
  EXPECT_EQ(csr.read64(reg::kTileConfig0), 0x7Fu);
  {
    runtime::EdgeTpu tpu(std::move(transport), nullptr, nullptr);  // the open sequence
    auto caching = std::make_shared<runtime::Program>(tinycoral::testing::make_caching(5000));
    auto inference =
        std::make_shared<runtime::Program>(tinycoral::testing::make_inference(3000, {1500, 1500}));
    std::vector<uint8_t> in(3000);
    for (size_t i = 0; i < in.size(); ++i) in[i] = uint8_t(i * 13);
    for (int round = 0; round < 2; ++round) {
      inference->set_input(0, in);
      tpu.run(caching, inference);
      for (uint32_t k = 0; k < 2; ++k) {
        std::vector<uint8_t> out(1500);
        inference->get_output(k, out);
        EXPECT_EQ(out,
                  tinycoral::testing::expected_output(
                      in, k, 1500, tinycoral::testing::byte_sum(caching->executable().parameters)));
      }
    }
    EXPECT_GT(tpu.counters().bulk_out_bytes, 8000u);
  }  // the close sequence
  EXPECT_EQ((stick.register_value(reg::kScuCtrl3) >> kForceSleepShift) & 3, kForceSleepReset);
  EXPECT_TRUE(stick.violations().empty());
#endif
}
