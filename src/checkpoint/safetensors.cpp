// safetensors files (read: mmap, zero-copy, validated; write: streaming) and checkpoint
// directories (one file, shards named by model.safetensors.index.json, or every
// *.safetensors file).
//
// File layout: u64 little-endian N, N bytes of UTF-8 JSON header, then the data section.
// Every size read from a file is checked against the file before use, and every loop is
// bounded by the header's size, so a hostile file yields fp4moe::Error, never a crash.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "backend.hpp"
#include "fp4moe/checkpoint.hpp"

namespace fp4moe {

using detail::fail_arg;
using json = nlohmann::json;

namespace {

constexpr uint64_t kMaxHeader = 100ull << 20;  // the reference implementation's limit
constexpr uint64_t kMaxText = 64ull << 20;     // config.json and index files
constexpr size_t kMaxDims = 8;

std::string printable(std::string_view s) {
  // Names come from hostile files: keep messages short and printable.
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 200; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  if (s.size() > 200) out += "...";
  return out + "'";
}

std::string errno_text() { return std::strerror(errno); }

// First pass over the header: rejects duplicate keys (the DOM parser keeps one silently),
// nesting deeper than a valid header has (top object > tensor entry > shape array), and
// reports JSON syntax errors with their byte position.
class HeaderChecker : public nlohmann::json_sax<json> {
 public:
  std::string error;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return value() && push(false); }
  bool key(string_t& k) override {
    if (!open_.back().keys.insert(k).second) {
      error = open_.size() == 1 ? "tensor " + printable(k) + " appears twice"
                                : "key " + printable(k) + " appears twice in one object";
      return false;
    }
    return true;
  }
  bool end_object() override {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return value() && push(true); }
  bool end_array() override {
    open_.pop_back();
    return true;
  }
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& e) override {
    error = "header is not valid JSON (byte " + std::to_string(pos) + "): " + e.what();
    return false;
  }

 private:
  struct Open {
    bool array;
    size_t count = 0;                 // elements so far (arrays)
    std::set<std::string> keys;       // keys so far (objects)
  };
  // Counts one value against the enclosing array: no valid array (shape, data_offsets)
  // holds more than 8, and the DOM of a long hostile one would cost memory for nothing.
  bool value() {
    if (!open_.empty() && open_.back().array && ++open_.back().count > kMaxDims) {
      error = "header holds an array of more than " + std::to_string(kMaxDims) + " elements";
      return false;
    }
    return true;
  }
  bool push(bool array) {
    if (open_.size() == 3) {
      error = "header nests deeper than 3 levels";
      return false;
    }
    open_.push_back(Open{array, 0, {}});
    return true;
  }
  std::vector<Open> open_;
};

std::optional<DType> fp4moe_dtype(std::string_view st) {
  if (st == "U8") return DType::u8;
  if (st == "F8_E4M3") return DType::e4m3;
  if (st == "F8_E8M0") return DType::e8m0;
  if (st == "I32") return DType::i32;
  if (st == "F32") return DType::f32;
  if (st == "F16") return DType::f16;
  if (st == "BF16") return DType::bf16;
  return std::nullopt;
}

const char* kKnownDtypes = "BOOL, U8, I8, U16, I16, F16, BF16, U32, I32, F32, U64, I64, F64, F8_E4M3, F8_E5M2, F8_E8M0";

// Bytes of a tensor of `shape` and `dtype`; fails (naming `where`) when a dim is negative,
// or when the element count, ignoring zero dims, times the element size exceeds int64
// (so that the strides of any view over it are representable).
uint64_t checked_nbytes(const std::vector<int64_t>& shape, size_t esize, const std::string& where) {
  uint64_t nonzero = 1, numel = 1;
  const uint64_t limit = uint64_t(std::numeric_limits<int64_t>::max()) / esize;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) fail_arg(where + "shape[" + std::to_string(d) + "]: got " + std::to_string(shape[d]) + ", need >= 0");
    uint64_t n = uint64_t(shape[d]);
    numel *= n;  // cannot overflow: bounded by `nonzero`, which is checked
    if (n == 0) continue;
    if (nonzero > limit / n)
      fail_arg(where + "shape: element count overflows (need at most " + std::to_string(limit) + " elements)");
    nonzero *= n;
  }
  return numel * esize;
}

// Validates one tensor entry of the header: {"dtype": .., "shape": [..], "data_offsets": [b, e]}.
TensorInfo parse_entry(const std::string& name, const json& v, uint64_t data_size, const std::string& where) {
  if (name.empty()) fail_arg(where + "tensor name: got '', need a non-empty name");
  if (!v.is_object()) fail_arg(where + "entry: got JSON " + std::string(v.type_name()) + ", need an object");
  for (const auto& [k, _] : v.items())
    if (k != "dtype" && k != "shape" && k != "data_offsets")
      fail_arg(where + "key " + printable(k) + ": unknown, need only dtype, shape, data_offsets");
  TensorInfo t;
  t.name = name;

  auto dt = v.find("dtype");
  if (dt == v.end()) fail_arg(where + "dtype: missing");
  if (!dt->is_string()) fail_arg(where + "dtype: got JSON " + std::string(dt->type_name()) + ", need a string");
  t.dtype = dt->get<std::string>();
  const size_t esize = safetensors_dtype_size(t.dtype);
  if (esize == 0) fail_arg(where + "dtype: got " + printable(t.dtype) + ", need one of " + kKnownDtypes);

  auto sh = v.find("shape");
  if (sh == v.end()) fail_arg(where + "shape: missing");
  if (!sh->is_array()) fail_arg(where + "shape: got JSON " + std::string(sh->type_name()) + ", need an array");
  if (sh->size() > kMaxDims)
    fail_arg(where + "shape: got " + std::to_string(sh->size()) + " dims, need at most " + std::to_string(kMaxDims));
  for (size_t d = 0; d < sh->size(); ++d) {
    const json& x = (*sh)[d];
    if (!x.is_number_unsigned() || x.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      fail_arg(where + "shape[" + std::to_string(d) + "]: got " + x.dump() + ", need a non-negative integer");
    t.shape.push_back(int64_t(x.get<uint64_t>()));
  }
  const uint64_t nbytes = checked_nbytes(t.shape, esize, where);

  auto off = v.find("data_offsets");
  if (off == v.end()) fail_arg(where + "data_offsets: missing");
  if (!off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned())
    fail_arg(where + "data_offsets: got " + off->dump().substr(0, 200) + ", need [begin, end] non-negative integers");
  t.begin = (*off)[0].get<uint64_t>();
  t.end = (*off)[1].get<uint64_t>();
  if (t.end < t.begin)
    fail_arg(where + "data_offsets: got [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "], need begin <= end");
  if (t.end > data_size)
    fail_arg(where + "data_offsets: end " + std::to_string(t.end) + " is past the data section (" +
             std::to_string(data_size) + " bytes)");
  if (t.end - t.begin != nbytes)
    fail_arg(where + "data_offsets: range holds " + std::to_string(t.end - t.begin) + " bytes, need " +
             std::to_string(nbytes) + " (shape x " + t.dtype + ")");
  return t;
}

// A plain file name inside a checkpoint directory: no separators, not "." or "..".
bool plain_name(const std::string& f) {
  return !f.empty() && f != "." && f != ".." && f.find('/') == std::string::npos &&
         f.find('\\') == std::string::npos && f.find('\0') == std::string::npos;
}

// Reads a whole small file; nullopt when it does not exist.
std::optional<std::string> read_small(const std::string& path, const std::string& what) {
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) return std::nullopt;
  if (!std::filesystem::is_regular_file(st)) fail_arg(what + ": " + path + " is not a regular file");
  auto size = std::filesystem::file_size(path, ec);
  if (ec) fail_arg(what + ": cannot stat " + path + ": " + ec.message());
  if (size > kMaxText)
    fail_arg(what + ": " + path + " is " + std::to_string(size) + " bytes, need at most " + std::to_string(kMaxText));
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_arg(what + ": cannot open " + path + ": " + errno_text());
  std::string text(size, '\0');
  in.read(text.data(), std::streamsize(size));
  text.resize(size_t(in.gcount()));
  return text;
}

}  // namespace

size_t safetensors_dtype_size(std::string_view d) {
  if (d == "BOOL" || d == "U8" || d == "I8" || d == "F8_E4M3" || d == "F8_E5M2" || d == "F8_E8M0") return 1;
  if (d == "U16" || d == "I16" || d == "F16" || d == "BF16") return 2;
  if (d == "U32" || d == "I32" || d == "F32") return 4;
  if (d == "U64" || d == "I64" || d == "F64") return 8;
  return 0;
}

// ---------------------------------------------------------------------------
// SafetensorsFile
// ---------------------------------------------------------------------------
struct SafetensorsFile::Impl {
  std::string path;
  std::vector<uint8_t> owned;         // from_bytes
  void* map = nullptr;                // open(): the whole file, PROT_READ
  size_t map_size = 0;
  const uint8_t* data = nullptr;      // the data section
  uint64_t data_size = 0;
  std::vector<TensorInfo> tensors;    // sorted by (begin, end, name)
  std::map<std::string, size_t, std::less<>> index;
  std::map<std::string, std::string> metadata;

  ~Impl() {
    if (map) munmap(map, map_size);
  }

  // Validates `file` (the whole file's bytes) and fills everything but `path`.
  void parse(const uint8_t* file, uint64_t size) {
    const std::string where = path + ": ";
    if (size < 8) fail_arg(where + "file is " + std::to_string(size) + " bytes, need at least 8 (the header length)");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | file[i];
    if (n > size - 8)
      fail_arg(where + "header length " + std::to_string(n) + " is past the end of the file (size " + std::to_string(size) + ")");
    if (n > kMaxHeader)
      fail_arg(where + "header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxHeader) + " bytes");
    if (n < 2) fail_arg(where + "header length " + std::to_string(n) + " is too small, need at least 2");
    const char* h = reinterpret_cast<const char*>(file + 8);
    data = file + 8 + n;
    data_size = size - 8 - n;

    HeaderChecker checker;
    if (!json::sax_parse(h, h + n, &checker, nlohmann::detail::input_format_t::json, true))
      fail_arg(where + checker.error);
    json root;
    try {
      root = json::parse(h, h + n);
    } catch (const json::exception& e) {
      fail_arg(where + "header is not valid JSON: " + e.what());
    }
    if (!root.is_object()) fail_arg(where + "header: got JSON " + std::string(root.type_name()) + ", need an object");

    for (const auto& [name, v] : root.items()) {
      if (name == "__metadata__") {
        if (!v.is_object()) fail_arg(where + "__metadata__: got JSON " + std::string(v.type_name()) + ", need an object");
        for (const auto& [k, s] : v.items()) {
          if (!s.is_string())
            fail_arg(where + "__metadata__[" + printable(k) + "]: got JSON " + std::string(s.type_name()) + ", need a string");
          metadata[k] = s.get<std::string>();
        }
        continue;
      }
      tensors.push_back(parse_entry(name, v, data_size, where + "tensor " + printable(name) + ": "));
    }
    std::sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
      return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
    });
    for (size_t i = 1; i < tensors.size(); ++i) {
      const TensorInfo& a = tensors[i - 1];
      const TensorInfo& b = tensors[i];
      if (b.begin < a.end)
        fail_arg(where + "tensor " + printable(b.name) + ": data_offsets [" + std::to_string(b.begin) + ", " +
                 std::to_string(b.end) + ") overlap tensor " + printable(a.name) + " [" + std::to_string(a.begin) + ", " +
                 std::to_string(a.end) + ")");
    }
    for (size_t i = 0; i < tensors.size(); ++i) index.emplace(tensors[i].name, i);
  }
};

SafetensorsFile::SafetensorsFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_arg(path + ": cannot open: " + errno_text());
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    std::string why = errno_text();
    ::close(fd);
    fail_arg(path + ": cannot stat: " + why);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail_arg(path + ": not a regular file");
  }
  const uint64_t size = uint64_t(st.st_size);
  if (size >= 8) {
    void* p = mmap(nullptr, size_t(size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      std::string why = errno_text();
      ::close(fd);
      fail_arg(path + ": cannot mmap " + std::to_string(size) + " bytes: " + why);
    }
    impl->map = p;
    impl->map_size = size_t(size);
  }
  ::close(fd);  // the mapping keeps the file alive
  impl->parse(static_cast<const uint8_t*>(impl->map), size);
  return SafetensorsFile(std::move(impl));
}

SafetensorsFile SafetensorsFile::from_bytes(std::vector<uint8_t> bytes, const std::string& name) {
  auto impl = std::make_unique<Impl>();
  impl->path = name;
  impl->owned = std::move(bytes);
  impl->parse(impl->owned.data(), impl->owned.size());
  return SafetensorsFile(std::move(impl));
}

const std::string& SafetensorsFile::path() const { return impl_->path; }
const std::vector<TensorInfo>& SafetensorsFile::tensors() const { return impl_->tensors; }
const std::map<std::string, std::string>& SafetensorsFile::metadata() const { return impl_->metadata; }

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = impl_->index.find(name);
  return it == impl_->index.end() ? nullptr : &impl_->tensors[it->second];
}

const TensorInfo& SafetensorsFile::at(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (!t) fail_arg(impl_->path + ": tensor " + printable(name) + ": not in the file");
  return *t;
}

std::span<const uint8_t> SafetensorsFile::bytes(const TensorInfo& t) const {
  // `t` may be a caller's copy: check it against this file's entry, not just its range.
  const TensorInfo* own = find(t.name);
  if (!own || own->begin != t.begin || own->end != t.end)
    fail_arg(impl_->path + ": tensor " + printable(t.name) + ": not an entry of this file");
  return {impl_->data + own->begin, size_t(own->end - own->begin)};
}

TensorView SafetensorsFile::view(const TensorInfo& t) const {
  auto b = bytes(t);
  const std::string where = impl_->path + ": tensor " + printable(t.name) + ": ";
  auto dt = fp4moe_dtype(t.dtype);
  if (!dt) fail_arg(where + "dtype: got " + t.dtype + ", need one of U8, F8_E4M3, F8_E8M0, I32, F32, F16, BF16");
  if (t.shape.size() > size_t(TensorView::kMaxDims))
    fail_arg(where + "shape: got " + std::to_string(t.shape.size()) + " dims, need at most " +
             std::to_string(TensorView::kMaxDims));
  // The data may be unaligned for its dtype when the writer did not pad the header to 8
  // bytes or packed tensors of mixed sizes: readers of the view copy with memcpy.
  return TensorView::of(b.data(), *dt, find(t.name)->shape);
}

// ---------------------------------------------------------------------------
// Checkpoint
// ---------------------------------------------------------------------------
struct Checkpoint::Impl {
  std::string dir;
  std::map<std::string, std::string, std::less<>> owner;                     // tensor -> file name
  mutable std::map<std::string, std::unique_ptr<SafetensorsFile>> files;     // file name -> opened file

  const SafetensorsFile& file(const std::string& f) const {
    auto it = files.find(f);
    if (it == files.end())
      it = files.emplace(f, std::make_unique<SafetensorsFile>(SafetensorsFile::open(dir + "/" + f))).first;
    return *it->second;
  }
};

Checkpoint::Checkpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

Checkpoint Checkpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail_arg("Checkpoint::open: " + dir + " is not a directory");
  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  const std::string index_path = dir + "/model.safetensors.index.json";

  if (auto text = read_small(index_path, "Checkpoint::open")) {
    json root;
    try {
      root = json::parse(*text);
    } catch (const json::exception& e) {
      fail_arg(index_path + ": not valid JSON: " + e.what());
    }
    if (!root.is_object() || !root.contains("weight_map") || !root["weight_map"].is_object())
      fail_arg(index_path + ": need an object with a \"weight_map\" object");
    for (const auto& [name, f] : root["weight_map"].items()) {
      const std::string where = index_path + ": weight_map[" + printable(name) + "]: ";
      if (!f.is_string()) fail_arg(where + "got JSON " + std::string(f.type_name()) + ", need a file name");
      const std::string file = f.get<std::string>();
      if (!plain_name(file)) fail_arg(where + "got " + printable(file) + ", need a plain file name inside " + dir);
      if (!fs::is_regular_file(dir + "/" + file, ec)) fail_arg(where + "file " + printable(file) + " does not exist in " + dir);
      impl->owner.emplace(name, file);
    }
    return Checkpoint(std::move(impl));
  }

  std::vector<std::string> shards;
  if (fs::exists(dir + "/model.safetensors", ec)) {
    shards.push_back("model.safetensors");
  } else {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string f = e.path().filename().string();
      if (f.size() > 12 && f.ends_with(".safetensors") && e.is_regular_file(ec)) shards.push_back(f);
    }
    if (ec) fail_arg("Checkpoint::open: cannot list " + dir + ": " + ec.message());
    std::sort(shards.begin(), shards.end());
  }
  if (shards.empty()) fail_arg("Checkpoint::open: " + dir + " holds no .safetensors file");
  for (const auto& f : shards) {
    for (const auto& t : impl->file(f).tensors()) {
      auto [it, fresh] = impl->owner.emplace(t.name, f);
      if (!fresh)
        fail_arg("Checkpoint::open: " + dir + ": tensor " + printable(t.name) + " is in both " + it->second + " and " + f);
    }
  }
  return Checkpoint(std::move(impl));
}

const std::string& Checkpoint::dir() const { return impl_->dir; }

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(impl_->owner.size());
  for (const auto& [name, _] : impl_->owner) out.push_back(name);
  return out;
}

bool Checkpoint::has(std::string_view name) const { return impl_->owner.find(name) != impl_->owner.end(); }

std::pair<const SafetensorsFile*, const TensorInfo*> Checkpoint::find(std::string_view name) const {
  auto it = impl_->owner.find(name);
  if (it == impl_->owner.end()) fail_arg("checkpoint " + impl_->dir + ": tensor " + printable(name) + ": not found");
  const SafetensorsFile& f = impl_->file(it->second);
  const TensorInfo* t = f.find(name);
  if (!t)
    fail_arg("checkpoint " + impl_->dir + ": tensor " + printable(name) + ": the index names " + it->second +
             ", which does not hold it");
  return {&f, t};
}

TensorView Checkpoint::view(std::string_view name) const {
  auto [f, t] = find(name);
  return f->view(*t);
}

std::string Checkpoint::read_text(const std::string& file) const {
  if (!plain_name(file)) fail_arg("Checkpoint::read_text: file: got " + printable(file) + ", need a plain file name");
  return read_small(impl_->dir + "/" + file, "Checkpoint::read_text").value_or("");
}

// ---------------------------------------------------------------------------
// SafetensorsWriter
// ---------------------------------------------------------------------------
struct SafetensorsWriter::Impl {
  std::string path, tmp;
  std::FILE* out = nullptr;
  bool failed = false;              // a write failed or close found the file incomplete
  std::vector<TensorInfo> tensors;  // declaration order, offsets filled in
  size_t next = 0;                  // index of the next tensor to write

  void abandon() noexcept {
    if (out) std::fclose(out);
    out = nullptr;
    failed = true;
    std::remove(tmp.c_str());
  }
  void put(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, out) != n) {
      std::string why = errno_text();
      abandon();
      fail_arg("SafetensorsWriter: " + tmp + ": write failed: " + why);
    }
  }
};

SafetensorsWriter::SafetensorsWriter(const std::string& path, const std::vector<TensorInfo>& tensors,
                                     const std::map<std::string, std::string>& metadata)
    : impl_(std::make_unique<Impl>()) {
  Impl& w = *impl_;
  w.path = path;
  w.tmp = path + ".tmp";
  // Header keys keep declaration order (ordered_json), so the output is deterministic.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string, std::less<>> seen;
  uint64_t offset = 0;
  for (const TensorInfo& t : tensors) {
    const std::string where = "SafetensorsWriter: " + path + ": tensor " + printable(t.name) + ": ";
    if (t.name.empty() || t.name == "__metadata__") fail_arg(where + "name: need a non-empty name other than __metadata__");
    if (!seen.insert(t.name).second) fail_arg(where + "declared twice");
    const size_t esize = safetensors_dtype_size(t.dtype);
    if (esize == 0) fail_arg(where + "dtype: got " + printable(t.dtype) + ", need one of " + kKnownDtypes);
    if (t.shape.size() > kMaxDims)
      fail_arg(where + "shape: got " + std::to_string(t.shape.size()) + " dims, need at most " + std::to_string(kMaxDims));
    const uint64_t n = checked_nbytes(t.shape, esize, where);
    if (offset > std::numeric_limits<uint64_t>::max() - n) fail_arg(where + "total size overflows");
    TensorInfo d = t;
    d.begin = offset;
    d.end = offset + n;
    offset = d.end;
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {d.begin, d.end}}};
    w.tensors.push_back(std::move(d));
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::ordered_json::exception& e) {
    fail_arg("SafetensorsWriter: " + path + ": a name or metadata string is not valid UTF-8: " + e.what());
  }
  // Pad with spaces so the data section starts 8-byte aligned (as the reference writer does).
  text.append((8 - text.size() % 8) % 8, ' ');

  w.out = std::fopen(w.tmp.c_str(), "wb");
  if (!w.out) fail_arg("SafetensorsWriter: cannot create " + w.tmp + ": " + errno_text());
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  w.put(len, 8);
  w.put(text.data(), text.size());
}

SafetensorsWriter::~SafetensorsWriter() {
  if (impl_->failed) return;
  try {
    close();
  } catch (...) {
    // An unfinished file is removed, never left half-written under its final name.
    impl_->abandon();
  }
}

void SafetensorsWriter::write(std::string_view name, std::span<const uint8_t> bytes) {
  Impl& w = *impl_;
  if (!w.out) fail_arg("SafetensorsWriter::write: " + w.path + ": the writer is closed or abandoned");
  if (w.next == w.tensors.size())
    fail_arg("SafetensorsWriter::write: " + w.path + ": tensor " + printable(name) + ": every declared tensor is already written");
  const TensorInfo& t = w.tensors[w.next];
  if (name != t.name)
    fail_arg("SafetensorsWriter::write: " + w.path + ": tensor: got " + printable(name) + ", need " + printable(t.name) +
             " (declaration order)");
  if (bytes.size() != t.end - t.begin)
    fail_arg("SafetensorsWriter::write: " + w.path + ": tensor " + printable(name) + ": got " + std::to_string(bytes.size()) +
             " bytes, need " + std::to_string(t.end - t.begin));
  w.put(bytes.data(), bytes.size());
  ++w.next;
}

void SafetensorsWriter::close() {
  Impl& w = *impl_;
  if (w.failed) fail_arg("SafetensorsWriter::close: " + w.path + ": an earlier error abandoned the file");
  if (!w.out) return;
  if (w.next != w.tensors.size()) {
    std::string missing = w.tensors[w.next].name;
    w.abandon();
    fail_arg("SafetensorsWriter::close: " + w.path + ": tensor " + printable(missing) + " was declared but never written");
  }
  if (std::fclose(w.out) != 0) {
    w.out = nullptr;
    w.failed = true;
    std::string why = errno_text();
    std::remove(w.tmp.c_str());
    fail_arg("SafetensorsWriter::close: " + w.tmp + ": " + why);
  }
  w.out = nullptr;
  if (std::rename(w.tmp.c_str(), w.path.c_str()) != 0) {
    w.failed = true;
    std::string why = errno_text();
    std::remove(w.tmp.c_str());
    fail_arg("SafetensorsWriter::close: cannot rename " + w.tmp + " to " + w.path + ": " + why);
  }
}

}  // namespace fp4moe
