#include "mocked_stick.h"

#include <string_view>

namespace tinycoral::testing {
namespace {

std::string hex(const std::vector<uint8_t>& bytes) {
  static constexpr std::string_view kDigits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

std::string three_digits(int n) {
  std::string s = std::to_string(n);
  return std::string(3 - std::min<size_t>(3, s.size()), '0') + s;
}

}  // namespace

MockedStick::MockedStick(usb::VirtualStick& stick, int port) : stick_(stick), port_(port) {
  testbed_ = umockdev_testbed_new();
  std::lock_guard lock(mutex_);
  // Only meaningful once a testbed exists (umockdev checks whether /sys is redirected). Without
  // the preload library libusb would scan the real bus: a broken setup, not a reason to skip.
  if (!umockdev_in_mock_environment())
    problem(
        "umockdev's preload library is not loaded: run under umockdev-wrapper (ctest sets "
        "LD_PRELOAD=libumockdev-preload.so.0)");
  publish();
}

MockedStick::~MockedStick() {
  {
    std::lock_guard lock(mutex_);
    if (!nodes_.empty())
      umockdev_testbed_detach_ioctl(testbed_, nodes_.back().dev.c_str(), nullptr);
  }
  // Every libusb handle is closed by now, so no ioctl is in flight; the testbed stops its worker.
  g_object_unref(testbed_);
  for (Node& node : nodes_) {
    g_signal_handlers_disconnect_by_data(node.handler, node.responder.get());
    g_object_unref(node.handler);
  }
}

int MockedStick::enumerations() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(nodes_.size());
}

int MockedStick::urbs_submitted() const {
  std::lock_guard lock(mutex_);
  int n = 0;
  for (const Node& node : nodes_) n += node.responder->urbs_submitted();
  return n;
}

int MockedStick::urbs_discarded() const {
  std::lock_guard lock(mutex_);
  int n = 0;
  for (const Node& node : nodes_) n += node.responder->urbs_discarded();
  return n;
}

std::vector<std::string> MockedStick::problems() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> all = problems_;
  for (const Node& node : nodes_)
    for (const std::string& request : node.responder->unknown_requests())
      all.push_back(node.dev + ": unanswered usbdevfs request " + request);
  return all;
}

void MockedStick::problem(std::string what) { problems_.push_back(std::move(what)); }

void MockedStick::publish() {
  // Real hardware gets the next free device number on every enumeration.
  const int devnum = port_ + 1 + 10 * static_cast<int>(nodes_.size());
  Node node;
  node.vendor_id = stick_.vendor_id();
  node.product_id = stick_.product_id();
  node.sysfs_path = "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-" + std::to_string(port_);
  node.dev = "/dev/bus/usb/001/" + three_digits(devnum);
  std::vector<uint8_t> descriptors = stick_.device_descriptor();
  const std::vector<uint8_t> config = stick_.config_descriptor();
  descriptors.insert(descriptors.end(), config.begin(), config.end());
  // libusb's udev scan needs DEVNAME (else it skips the device), bus and device numbers, and reads
  // the descriptors and the active configuration from sysfs.
  const std::string record =
      "P: " + node.sysfs_path.substr(4) + "\nN: " + node.dev.substr(5) +
      "\nE: DEVNAME=" + node.dev +
      "\nE: SUBSYSTEM=usb\nE: DEVTYPE=usb_device\nE: BUSNUM=001\nE: DEVNUM=" +
      three_digits(devnum) + "\nA: busnum=1\nA: devnum=" + std::to_string(devnum) +
      "\nA: speed=480\nA: bConfigurationValue=1\nH: descriptors=" + hex(descriptors) + "\n";
  GError* error = nullptr;
  if (!umockdev_testbed_add_from_string(testbed_, record.c_str(), &error)) {
    problem("umockdev_testbed_add_from_string: " + std::string(error ? error->message : "failed"));
    if (error) g_error_free(error);
    return;
  }
  node.handler = umockdev_ioctl_base_new();
  node.responder = std::make_unique<UsbdevfsResponder>(stick_);
  node.responder->on_reset = [this] { reenumerate(); };
  node.responder->serve(node.handler);
  if (!umockdev_testbed_attach_ioctl(testbed_, node.dev.c_str(), node.handler, &error)) {
    problem("umockdev_testbed_attach_ioctl: " + std::string(error ? error->message : "failed"));
    if (error) g_error_free(error);
  }
  nodes_.push_back(std::move(node));
}

void MockedStick::reenumerate() {
  std::lock_guard lock(mutex_);
  Node& current = nodes_.back();
  // A reset that leaves the stick as it was keeps the device (and its handles) in place.
  if (stick_.vendor_id() == current.vendor_id && stick_.product_id() == current.product_id) return;
  current.responder->disconnect();
  GError* error = nullptr;
  if (!umockdev_testbed_detach_ioctl(testbed_, current.dev.c_str(), &error)) {
    problem("umockdev_testbed_detach_ioctl: " + std::string(error ? error->message : "failed"));
    if (error) g_error_free(error);
  }
  umockdev_testbed_remove_device(testbed_, current.sysfs_path.c_str());
  publish();
}

}  // namespace tinycoral::testing
