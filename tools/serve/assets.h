// The web app's files (web/: the page, its script and style sheet), compiled into the binary at
// build time by embed_assets.cmake, so that `tinycoral serve` works offline and from anywhere.
#pragma once

#include <string_view>

namespace tinycoral::serve {

struct Asset {
  std::string_view path;  // "/index.html", "/app.js", "/style.css"
  std::string_view bytes;
  const char* content_type;
};

// The asset served at `path`, or null.
const Asset* find_asset(std::string_view path);

}  // namespace tinycoral::serve
