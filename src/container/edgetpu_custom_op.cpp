// The edgetpu-custom-op options map (FlexBuffers) <-> EdgeTpuCustomOp. Keys per driver.md 5.1:
// "1" version, "2" chip name (deprecated), "3" old parameter-caching executable (ignored, as
// libedgetpu does), "4" the first package, "5" execution preference, "6" chip id per package,
// "7" further packages. The buffer is verified before any value is read.
#include "container/edgetpu_custom_op.h"

#include <flatbuffers/flexbuffers.h>

#include "common/error.h"
#include "container/flatbuffer_util.h"
#include "container/package.h"

namespace tinycoral::container {
namespace {

// The bytes of a string or blob value (a package is stored as either).
std::span<const uint8_t> bytes_of(const flexbuffers::Reference& r, const char* what) {
  if (!r.IsString() && !r.IsBlob()) fail(what, " is not a string or blob");
  const flexbuffers::Blob blob = r.AsBlob();
  return {blob.data(), blob.size()};
}

int64_t int_of(const flexbuffers::Reference& r, const char* what) {
  if (!r.IsIntOrUint()) fail(what, " is not an integer");
  return r.AsInt64();
}

Package read_package_at(std::span<const uint8_t> bytes, size_t index,
                        std::vector<std::string>* warnings) {
  return with_context(cat("package ", index), [&] { return read_package(bytes, warnings); });
}

}  // namespace

EdgeTpuCustomOp read_edgetpu_custom_op(std::span<const uint8_t> flexbuffer,
                                       std::vector<std::string>* warnings) {
  if (flexbuffer.size() < 3)
    fail("edgetpu-custom-op options are only ", flexbuffer.size(), " bytes");
  const detail::AlignedBytes buf(flexbuffer);
  // The reuse tracker makes verification linear in the buffer size even when offsets are shared.
  std::vector<uint8_t> tracker;
  flexbuffers::Verifier verifier(buf.data(), buf.size(), &tracker);
  if (!verifier.VerifyBuffer())
    fail("edgetpu-custom-op options are not a valid FlexBuffer (an offset or size points outside)");
  const flexbuffers::Reference root = flexbuffers::GetRoot(buf.data(), buf.size());
  if (!root.IsMap()) fail("edgetpu-custom-op options are not a FlexBuffers map");
  const flexbuffers::Map map = root.AsMap();

  EdgeTpuCustomOp out;
  if (const auto r = map["1"]; !r.IsNull()) out.version = int_of(r, "key \"1\" (version)");
  if (const auto r = map["2"]; !r.IsNull()) {
    if (!r.IsString()) fail("key \"2\" (chip name) is not a string");
    out.chip_name = r.AsString().str();
  }
  if (!map["3"].IsNull() && warnings != nullptr)
    warnings->push_back("key \"3\" (deprecated parameter-caching executable) is ignored");
  if (const auto r = map["5"]; !r.IsNull())
    out.execution_preference = int_of(r, "key \"5\" (execution preference)");

  const auto first = map["4"];
  if (first.IsNull()) fail("edgetpu-custom-op options have no package (key \"4\")");
  out.packages.push_back(read_package_at(bytes_of(first, "key \"4\" (package)"), 0, warnings));

  if (const auto r = map["7"]; !r.IsNull()) {
    if (!r.IsUntypedVector()) fail("key \"7\" (further packages) is not a vector");
    const flexbuffers::Vector more = r.AsVector();
    for (size_t i = 0; i < more.size(); ++i)
      out.packages.push_back(
          read_package_at(bytes_of(more[i], "a key \"7\" entry"), i + 1, warnings));
  }
  if (const auto r = map["6"]; !r.IsNull()) {
    // Chip ids may be stored as a typed or an untyped vector of integers.
    if (r.IsTypedVector()) {
      const flexbuffers::TypedVector ids = r.AsTypedVector();
      for (size_t i = 0; i < ids.size(); ++i) out.chip_ids.push_back(int_of(ids[i], "a chip id"));
    } else if (r.IsUntypedVector()) {
      const flexbuffers::Vector ids = r.AsVector();
      for (size_t i = 0; i < ids.size(); ++i) out.chip_ids.push_back(int_of(ids[i], "a chip id"));
    } else {
      fail("key \"6\" (chip ids) is not a vector");
    }
    if (out.chip_ids.size() != out.packages.size())
      fail("key \"6\" lists ", out.chip_ids.size(), " chip ids for ", out.packages.size(),
           " packages");
  }
  return out;
}

std::vector<uint8_t> write_edgetpu_custom_op(const EdgeTpuCustomOp& op) {
  if (op.packages.empty()) fail("edgetpu-custom-op options need at least one package");
  if (!op.chip_ids.empty() && op.chip_ids.size() != op.packages.size())
    fail("edgetpu-custom-op has ", op.chip_ids.size(), " chip ids for ", op.packages.size(),
         " packages");
  std::vector<std::vector<uint8_t>> packages;
  // flexbuffers::Builder::String(str, len) copies len + 1 bytes (it expects a C string), so each
  // package gets a NUL after its last byte; the stored length stays the package's.
  for (const Package& p : op.packages) {
    packages.push_back(write_package(p));
    packages.back().push_back(0);
  }

  flexbuffers::Builder fbb(packages.front().size() + 1024);
  const size_t map = fbb.StartMap();
  fbb.Int("1", op.version);
  if (!op.chip_name.empty()) fbb.String("2", op.chip_name);
  fbb.Key("4");
  fbb.String(reinterpret_cast<const char*>(packages[0].data()), packages[0].size() - 1);
  fbb.Int("5", op.execution_preference);
  // Newer compilers always write keys 6 and 7; older ones neither (driver.md 5.1).
  if (!op.chip_ids.empty() || packages.size() > 1) {
    if (!op.chip_ids.empty())
      fbb.TypedVector("6", [&] {
        for (int64_t id : op.chip_ids) fbb.Int(id);
      });
    fbb.Vector("7", [&] {
      for (size_t i = 1; i < packages.size(); ++i)
        fbb.String(reinterpret_cast<const char*>(packages[i].data()), packages[i].size() - 1);
    });
  }
  fbb.EndMap(map);
  fbb.Finish();
  return fbb.GetBuffer();
}

}  // namespace tinycoral::container
