// The modeled stick time of a program run (stick_time.h).
#include "runtime/stick_time.h"

#include "runtime/device_select.h"
#include "runtime/edgetpu.h"
#include "runtime/edgetpu_delegate.h"

namespace tinycoral::runtime {

StickTime stick_time(const ProgramRun& run, const StickLink& link) {
  StickTime t;
  t.compute_ms_high = double(run.cycles) / chip::kClockHighHz * 1e3;
  t.compute_ms_max = double(run.cycles) / chip::kClockMaxHz * 1e3;
  t.to_device_ms = double(run.bytes_to_device) / link.host_to_device_bytes_per_s * 1e3;
  t.from_device_ms = double(run.bytes_from_device) / link.device_to_host_bytes_per_s * 1e3;
  t.per_run_ms = run.ran ? link.per_run_ms : 0.0;
  return t;
}

PackageRuns model_package(const container::Package& package) {
  const PackagePrograms programs = prepare_package(package);
  auto tpu = open_virtual_edgetpu({}, nullptr);
  // One run: the caching program, then the inference (each program's cycles are counted on their
  // own, so the inference's are those of every later run).
  tpu->run(programs.caching, programs.inference);
  return {tpu->last_run().caching, tpu->last_run().inference};
}

}  // namespace tinycoral::runtime
