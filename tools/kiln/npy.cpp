#include <tools/kiln/npy.h>

#include <kiln/runtime/core/tensor.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>

namespace kiln::tools {

using runtime::Error;
using runtime::Result;
using runtime::ScalarType;
using runtime::Status;

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

struct DescrEntry {
  char kind;
  int bytes;
  ScalarType dtype;
};
constexpr DescrEntry kDescrs[] = {
    {'f', 4, ScalarType::Float32}, {'f', 8, ScalarType::Float64}, {'f', 2, ScalarType::Float16},
    {'i', 1, ScalarType::Int8},    {'u', 1, ScalarType::UInt8},   {'i', 2, ScalarType::Int16},
    {'i', 4, ScalarType::Int32},   {'i', 8, ScalarType::Int64},   {'b', 1, ScalarType::Bool},
};

Status bad(std::string_view name, const std::string& problem) {
  return Status(Error::InvalidArgument, "read npy '" + std::string(name) + "': " + problem);
}

std::string system_error() { return std::strerror(errno); }

// A tiny parser for the header dict NumPy writes, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (1, 16), }
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  struct Header {
    std::optional<std::string> descr;
    std::optional<bool> fortran_order;
    std::optional<std::vector<int64_t>> shape;
  };

  // Returns the problem as text, or an empty string on success.
  std::string parse(Header& header) {
    skip_space();
    if (!eat('{')) return "header is not a dict (expected '{')";
    while (true) {
      skip_space();
      if (eat('}')) break;
      std::string key;
      if (!parse_string(key)) return "header key is not a quoted string at offset " + at();
      skip_space();
      if (!eat(':')) return "header has no ':' after key '" + key + "'";
      skip_space();
      std::string problem;
      if (key == "descr") {
        std::string value;
        if (!parse_string(value)) return "header 'descr' is not a string";
        header.descr = value;
      } else if (key == "fortran_order") {
        if (match("True")) {
          header.fortran_order = true;
        } else if (match("False")) {
          header.fortran_order = false;
        } else {
          return "header 'fortran_order' is not True or False";
        }
      } else if (key == "shape") {
        std::vector<int64_t> shape;
        problem = parse_shape(shape);
        if (!problem.empty()) return problem;
        header.shape = shape;
      } else {
        return "header has unknown key '" + key +
               "' (expected 'descr', 'fortran_order' and 'shape')";
      }
      skip_space();
      if (eat(',')) continue;
      skip_space();
      if (eat('}')) break;
      return "header dict is malformed at offset " + at();
    }
    return "";
  }

 private:
  std::string at() const { return std::to_string(pos_); }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool match(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  bool parse_string(std::string& out) {
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) return false;
    out = std::string(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return true;
  }
  std::string parse_shape(std::vector<int64_t>& shape) {
    if (!eat('(')) return "header 'shape' is not a tuple";
    while (true) {
      skip_space();
      if (eat(')')) return "";
      int64_t value = 0;
      const char* begin = text_.data() + pos_;
      const char* end = text_.data() + text_.size();
      auto [ptr, ec] = std::from_chars(begin, end, value);
      if (ec != std::errc() || ptr == begin) {
        return "header 'shape' has a non-integer entry at offset " + at();
      }
      if (value < 0) {
        return "header 'shape' has dimension " + std::to_string(value) + " (expected >= 0)";
      }
      pos_ += static_cast<size_t>(ptr - begin);
      // NumPy 1.x on Windows wrote "3L" for longs.
      eat('L');
      shape.push_back(value);
      skip_space();
      if (eat(')')) return "";
      if (!eat(',')) return "header 'shape' is malformed at offset " + at();
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

Result<ScalarType> dtype_from_descr(const std::string& descr, std::string_view name) {
  if (descr.size() >= 3) {
    const char order = descr[0];
    const char kind = descr[1];
    int bytes = 0;
    auto [ptr, ec] = std::from_chars(descr.data() + 2, descr.data() + descr.size(), bytes);
    if (ec == std::errc() && ptr == descr.data() + descr.size()) {
      for (const auto& entry : kDescrs) {
        if (entry.kind != kind || entry.bytes != bytes) continue;
        // Byte order does not matter for one-byte types; others must be little-endian.
        if (bytes == 1 || order == '<' || order == '=') return entry.dtype;
        if (order == '>') {
          return bad(name, "dtype '" + descr + "' is big-endian (expected little-endian, e.g. '<" +
                               kind + std::to_string(bytes) + "')");
        }
      }
    }
  }
  return bad(name, "dtype '" + descr +
                       "' is not supported (expected one of <f4 <f8 <f2 |i1 |u1 <i2 <i4 <i8 |b1)");
}

}  // namespace

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<std::string> npy_descr(ScalarType dtype) {
  for (const auto& entry : kDescrs) {
    if (entry.dtype != dtype) continue;
    const char order = entry.bytes == 1 ? '|' : '<';
    return std::string(1, order) + entry.kind + std::to_string(entry.bytes);
  }
  return Status(Error::NotSupported, "write npy: dtype " + std::string(runtime::to_string(dtype)) +
                                         " has no NumPy code (expected f32, f64, f16, i8, u8, "
                                         "i16, i32, i64 or bool)");
}

Result<NpyArray> parse_npy(const uint8_t* bytes, size_t size, std::string_view name) {
  if (size < kMagicSize + 4 || std::memcmp(bytes, kMagic, kMagicSize) != 0) {
    return bad(name, "file does not start with the NumPy magic \\x93NUMPY (is it a .npy file?)");
  }
  const uint8_t major = bytes[6];
  size_t header_len = 0;
  size_t header_start = 0;
  if (major == 1) {
    header_len = bytes[8] | (size_t{bytes[9]} << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return bad(name, "file is truncated in the header length");
    header_len =
        bytes[8] | (size_t{bytes[9]} << 8) | (size_t{bytes[10]} << 16) | (size_t{bytes[11]} << 24);
    header_start = 12;
  } else {
    return bad(name, "format version " + std::to_string(major) + "." + std::to_string(bytes[7]) +
                         " is not supported (expected 1.0, 2.0 or 3.0)");
  }
  if (header_len > size - header_start) {
    return bad(name, "header of " + std::to_string(header_len) + " bytes is truncated (file has " +
                         std::to_string(size - header_start) + " bytes after the preamble)");
  }
  std::string_view text(reinterpret_cast<const char*>(bytes + header_start), header_len);
  HeaderParser::Header header;
  std::string problem = HeaderParser(text).parse(header);
  if (!problem.empty()) return bad(name, problem);
  if (!header.descr) return bad(name, "header has no 'descr' key");
  if (!header.fortran_order) return bad(name, "header has no 'fortran_order' key");
  if (!header.shape) return bad(name, "header has no 'shape' key");

  NpyArray array;
  KILN_ASSIGN_OR_RETURN(array.dtype, dtype_from_descr(*header.descr, name));
  array.shape = *header.shape;
  if (*header.fortran_order && array.shape.size() > 1) {
    return bad(name,
               "array is in Fortran order (expected C order; save with "
               "np.ascontiguousarray)");
  }
  auto numel = runtime::checked_numel(array.shape);
  if (!numel.ok()) return bad(name, numel.status().message());
  const size_t data_start = header_start + header_len;
  const size_t available = size - data_start;
  const size_t element = runtime::element_size(array.dtype);
  if (static_cast<uint64_t>(*numel) > available / element ||
      static_cast<size_t>(*numel) * element != available) {
    return bad(name, "data has " + std::to_string(available) + " bytes (expected " +
                         std::to_string(static_cast<uint64_t>(*numel) * element) + " for " +
                         *header.descr + " " + runtime::shape_to_string(array.shape) + ")");
  }
  array.data.assign(bytes + data_start, bytes + size);
  return array;
}

Result<NpyArray> read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status(Error::AccessFailed, "read npy '" + path + "': cannot open: " + system_error());
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  if (in.bad()) {
    return Status(Error::AccessFailed, "read npy '" + path + "': read failed: " + system_error());
  }
  return parse_npy(bytes.data(), bytes.size(), path);
}

Result<std::vector<uint8_t>> encode_npy(ScalarType dtype, runtime::Span<const int64_t> shape,
                                        runtime::Span<const uint8_t> data) {
  KILN_ASSIGN_OR_RETURN(std::string descr, npy_descr(dtype));
  KILN_ASSIGN_OR_RETURN(int64_t numel, runtime::checked_numel(shape));
  const uint64_t expected = static_cast<uint64_t>(numel) * runtime::element_size(dtype);
  if (data.size() != expected) {
    return Status(Error::InvalidArgument, "write npy: data has " + std::to_string(data.size()) +
                                              " bytes (expected " + std::to_string(expected) +
                                              " for " + descr + " " +
                                              runtime::shape_to_string(shape) + ")");
  }
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dict += ",";
    if (i + 1 < shape.size()) dict += " ";
  }
  dict += "), }";
  // Pad with spaces and a final newline so the data starts on a 64-byte boundary.
  const bool v2 = dict.size() + 1 + 10 > 65535;
  const size_t preamble = v2 ? 12 : 10;
  size_t total = preamble + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';

  std::vector<uint8_t> out(kMagic, kMagic + kMagicSize);
  out.push_back(v2 ? 2 : 1);
  out.push_back(0);
  const size_t len = dict.size();
  out.push_back(static_cast<uint8_t>(len & 0xff));
  out.push_back(static_cast<uint8_t>((len >> 8) & 0xff));
  if (v2) {
    out.push_back(static_cast<uint8_t>((len >> 16) & 0xff));
    out.push_back(static_cast<uint8_t>((len >> 24) & 0xff));
  }
  out.insert(out.end(), dict.begin(), dict.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Status write_npy(const std::string& path, ScalarType dtype, runtime::Span<const int64_t> shape,
                 runtime::Span<const uint8_t> data) {
  KILN_ASSIGN_OR_RETURN(auto bytes, encode_npy(dtype, shape, data));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return Status(Error::AccessFailed, "write npy '" + path + "': cannot open: " + system_error());
  }
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    return Status(Error::AccessFailed, "write npy '" + path + "': write failed: " + system_error());
  }
  return Status();
}

}  // namespace kiln::tools
