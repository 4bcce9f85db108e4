// `tinycoral devices`: every Coral USB Accelerator on the bus with its state (bootloader: the
// firmware gets uploaded when it is first used; ready: the firmware runs), and the virtual stick.
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common/error.h"
#include "usb/firmware.h"
#include "usb/libusb_transport.h"
#include "usb/protocol.h"

namespace tinycoral::cli {
namespace {

void list_devices(bool json) {
  std::vector<usb::UsbStickInfo> sticks;
  std::string usb_problem;
  try {
    sticks = usb::list_usb_sticks();
  } catch (const Error& e) {
    usb_problem = e.what();
  }
  std::string firmware;
  try {
    firmware = usb::find_firmware("").string();
  } catch (const Error&) {
  }
  if (json) {
    nlohmann::json j;
    j["usb"] = nlohmann::json::array();
    for (const auto& s : sticks) {
      char id[16];
      std::snprintf(id, sizeof id, "%04x:%04x", s.vendor_id, s.product_id);
      j["usb"].push_back({{"device", "usb:" + std::to_string(s.index)},
                          {"port", s.port_path},
                          {"id", id},
                          {"state", s.bootloader() ? "bootloader" : "ready"}});
    }
    if (!usb_problem.empty()) j["usb_error"] = usb_problem;
    j["sim"] = "virtual stick (virtual Edge TPU behind the stick's wire protocol)";
    j["firmware"] = firmware;
    std::cout << j.dump() << "\n";
    return;
  }
  if (!usb_problem.empty()) std::cout << "USB: " << usb_problem << "\n";
  if (sticks.empty()) std::cout << "no Coral USB Accelerator found (1a6e:089a or 18d1:9302)\n";
  for (const auto& s : sticks) {
    char id[16];
    std::snprintf(id, sizeof id, "%04x:%04x", s.vendor_id, s.product_id);
    std::cout << "usb:" << s.index << "  port " << s.port_path << "  " << id << "  " << s.state()
              << "\n";
  }
  std::cout << "sim    virtual stick (the virtual Edge TPU behind the stick's wire protocol)\n";
  bool needs_firmware = false;
  for (const auto& s : sticks) needs_firmware |= s.bootloader();
  if (needs_firmware)
    std::cout << (firmware.empty() ? "firmware: " + std::string(usb::kFirmwareName) +
                                         " not found (see docs/driver.md)"
                                   : "firmware: " + firmware)
              << "\n";
}

}  // namespace

void add_devices_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "devices", "list Coral USB Accelerators (and their state) and the virtual stick");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "print the list as JSON");
  cmd->callback([json] { list_devices(*json); });
}

}  // namespace tinycoral::cli
