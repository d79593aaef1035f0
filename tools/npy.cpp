#include "npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <variant>

#include "cli_common.h"

namespace openaclnn_cli {

std::string NpyTypeName(NpyType type) {
    switch (type.kind) {
        case NpyKind::kFloat: return "float" + std::to_string(type.size * 8);
        case NpyKind::kSignedInt: return "int" + std::to_string(type.size * 8);
        case NpyKind::kUnsignedInt: return "uint" + std::to_string(type.size * 8);
        case NpyKind::kBool: return "bool";
    }
    return "?";
}

std::string NpyDescr(NpyType type) {
    const char order = type.size == 1 ? '|' : '<';
    char code = 'f';
    switch (type.kind) {
        case NpyKind::kFloat: code = 'f'; break;
        case NpyKind::kSignedInt: code = 'i'; break;
        case NpyKind::kUnsignedInt: code = 'u'; break;
        case NpyKind::kBool: code = 'b'; break;
    }
    return std::string(1, order) + code + std::to_string(type.size);
}

int64_t NpyArray::NumElements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

namespace {

// ---- the header: a Python dict literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } ----

struct Tuple {
    std::vector<int64_t> items;
};
struct List {};  // only recognised so that structured dtypes get a precise message
using Value = std::variant<std::string, bool, Tuple, List>;

class HeaderParser {
public:
    HeaderParser(const std::string &text, const std::string &label) : text_(text), label_(label) {}

    std::map<std::string, Value> ParseDict() {
        Skip();
        Expect('{');
        std::map<std::string, Value> dict;
        while (true) {
            Skip();
            if (Peek() == '}') {
                ++pos_;
                break;
            }
            std::string key = ParseString();
            Skip();
            Expect(':');
            Skip();
            if (dict.count(key)) Fail("key '" + key + "' appears twice");
            dict[key] = ParseValue();
            Skip();
            if (Peek() == ',') {
                ++pos_;
                continue;
            }
            Skip();
            Expect('}');
            break;
        }
        Skip();
        if (pos_ != text_.size()) Fail("unexpected text after the header dictionary");
        return dict;
    }

private:
    [[noreturn]] void Fail(const std::string &why) const {
        BadInput(label_ + ": malformed .npy header (" + why + ")");
    }
    char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
    void Skip() {
        while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                                       text_[pos_] == '\r')) {
            ++pos_;
        }
    }
    void Expect(char ch) {
        if (Peek() != ch) Fail(std::string("expected '") + ch + "' at offset " + std::to_string(pos_));
        ++pos_;
    }
    std::string ParseString() {
        const char quote = Peek();
        if (quote != '\'' && quote != '"') Fail("expected a quoted string at offset " + std::to_string(pos_));
        ++pos_;
        std::string s;
        while (pos_ < text_.size() && text_[pos_] != quote) {
            if (text_[pos_] == '\\') Fail("escape sequences are not expected in a numeric header");
            s += text_[pos_++];
        }
        if (pos_ >= text_.size()) Fail("unterminated string");
        ++pos_;
        return s;
    }
    int64_t ParseInteger() {
        const size_t start = pos_;
        if (Peek() == '-') Fail("negative dimension in shape");
        int64_t v = 0;
        while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
            const int digit = text_[pos_++] - '0';
            if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) Fail("dimension too large");
            v = v * 10 + digit;
        }
        if (pos_ == start) Fail("expected an integer at offset " + std::to_string(start));
        if (Peek() == 'L') ++pos_;  // Python 2 long suffix, as old NumPy wrote it
        return v;
    }
    Value ParseValue() {
        const char ch = Peek();
        if (ch == '\'' || ch == '"') return ParseString();
        if (text_.compare(pos_, 4, "True") == 0) {
            pos_ += 4;
            return true;
        }
        if (text_.compare(pos_, 5, "False") == 0) {
            pos_ += 5;
            return false;
        }
        if (ch == '(') {
            ++pos_;
            Tuple t;
            while (true) {
                Skip();
                if (Peek() == ')') {
                    ++pos_;
                    break;
                }
                t.items.push_back(ParseInteger());
                Skip();
                if (Peek() == ',') {
                    ++pos_;
                    continue;
                }
                Expect(')');
                break;
            }
            return t;
        }
        if (ch == '[') {
            // Skip a (possibly nested) list: a structured dtype, refused by the caller with a clear message.
            int depth = 0;
            do {
                if (pos_ >= text_.size()) Fail("unterminated list");
                if (text_[pos_] == '[') ++depth;
                if (text_[pos_] == ']') --depth;
                ++pos_;
            } while (depth > 0);
            return List{};
        }
        Fail("unexpected value at offset " + std::to_string(pos_));
    }

    const std::string &text_;
    const std::string &label_;
    size_t pos_ = 0;
};

struct Descr {
    NpyType type;
    bool big_endian;
};

Descr ParseDescr(const std::string &descr, const std::string &label) {
    auto refuse = [&](const std::string &why) -> Descr {
        BadInput(label + ": unsupported dtype '" + descr + "' (" + why +
                 "); expected a plain number type such as '<f4', '<f2', '<i8', '<i4' or '<u2'");
    };
    if (descr.size() >= 2 && descr[1] == 'O') refuse("Python objects");
    if (descr.size() < 3) refuse("not a numeric type");
    const char order = descr[0];
    const char code = descr[1];
    int size = 0;
    for (size_t i = 2; i < descr.size(); ++i) {
        if (descr[i] < '0' || descr[i] > '9' || size > 1000) refuse("not a numeric type");
        size = size * 10 + (descr[i] - '0');
    }
    bool big_endian;
    if (order == '<' || order == '=' || order == '|') {
        big_endian = false;  // '=' is native order; every platform this tool builds for is little-endian
    } else if (order == '>') {
        big_endian = true;
    } else {
        refuse("unknown byte order");
    }
    NpyType type{NpyKind::kFloat, size};
    switch (code) {
        case 'f':
            if (size != 2 && size != 4 && size != 8) refuse(size == 16 ? "long double" : "unknown float size");
            type.kind = NpyKind::kFloat;
            break;
        case 'i':
            if (size != 1 && size != 2 && size != 4 && size != 8) refuse("unknown integer size");
            type.kind = NpyKind::kSignedInt;
            break;
        case 'u':
            if (size != 1 && size != 2 && size != 4 && size != 8) refuse("unknown integer size");
            type.kind = NpyKind::kUnsignedInt;
            break;
        case 'b':
            if (size != 1) refuse("unknown bool size");
            type.kind = NpyKind::kBool;
            break;
        case 'c': return refuse("complex numbers");
        case 'O': return refuse("Python objects");
        case 'S':
        case 'U':
        case 'a': return refuse("strings");
        case 'V': return refuse("raw or structured records");
        case 'M':
        case 'm': return refuse("dates and times");
        default: return refuse("not a numeric type");
    }
    return Descr{type, big_endian && size > 1};
}

}  // namespace

NpyArray ParseNpy(const std::vector<uint8_t> &bytes, const std::string &label) {
    static const uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, 6) != 0) {
        BadInput(label + ": not a .npy file (missing the \\x93NUMPY magic" +
                 std::string(bytes.size() < 10 ? ", file too short)" : ")"));
    }
    const int major = bytes[6];
    const int minor = bytes[7];
    size_t header_len;
    size_t header_start;
    if (major == 1) {
        header_len = bytes[8] | (static_cast<size_t>(bytes[9]) << 8);
        header_start = 10;
    } else if (major == 2 || major == 3) {
        if (bytes.size() < 12) BadInput(label + ": truncated .npy header");
        header_len = bytes[8] | (static_cast<size_t>(bytes[9]) << 8) | (static_cast<size_t>(bytes[10]) << 16) |
                     (static_cast<size_t>(bytes[11]) << 24);
        header_start = 12;
    } else {
        BadInput(label + ": unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                 " (supported: 1.0, 2.0, 3.0)");
    }
    if (minor != 0) {
        BadInput(label + ": unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                 " (supported: 1.0, 2.0, 3.0)");
    }
    if (bytes.size() - header_start < header_len) {
        BadInput(label + ": truncated .npy header (needs " + std::to_string(header_len) + " bytes, file has " +
                 std::to_string(bytes.size() - header_start) + ")");
    }
    // Version 1 and 2 headers are latin-1, version 3 is UTF-8; a numeric header is plain ASCII either way.
    const std::string header(reinterpret_cast<const char *>(bytes.data()) + header_start, header_len);
    for (unsigned char ch : header) {
        if (ch >= 0x80 || (ch < 0x20 && ch != '\n' && ch != '\t' && ch != '\r')) {
            BadInput(label + ": malformed .npy header (non-ASCII or control bytes)");
        }
    }
    auto dict = HeaderParser(header, label).ParseDict();
    for (const char *key : {"descr", "fortran_order", "shape"}) {
        if (!dict.count(key)) BadInput(label + ": malformed .npy header (no '" + key + "' key)");
    }
    if (dict.size() != 3) BadInput(label + ": malformed .npy header (unexpected keys besides descr, fortran_order, shape)");
    if (std::holds_alternative<List>(dict["descr"])) {
        BadInput(label + ": unsupported dtype (a structured record type); expected a plain number type such as '<f4'");
    }
    if (!std::holds_alternative<std::string>(dict["descr"])) BadInput(label + ": malformed .npy header (descr)");
    if (!std::holds_alternative<bool>(dict["fortran_order"])) {
        BadInput(label + ": malformed .npy header (fortran_order is not True or False)");
    }
    if (!std::holds_alternative<Tuple>(dict["shape"])) BadInput(label + ": malformed .npy header (shape is not a tuple)");

    const Descr descr = ParseDescr(std::get<std::string>(dict["descr"]), label);
    NpyArray array;
    array.type = descr.type;
    array.shape = std::get<Tuple>(dict["shape"]).items;
    array.was_fortran_order = std::get<bool>(dict["fortran_order"]);
    array.was_big_endian = descr.big_endian;

    // Element count and byte size, refusing overflow.
    uint64_t count = 1;
    for (int64_t d : array.shape) {
        if (d != 0 && count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / static_cast<uint64_t>(d)) {
            BadInput(label + ": shape " + ShapeString(array.shape) + " is too large");
        }
        count *= static_cast<uint64_t>(d);
    }
    if (count > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(descr.type.size)) {
        BadInput(label + ": shape " + ShapeString(array.shape) + " is too large");
    }
    const uint64_t data_bytes = count * static_cast<uint64_t>(descr.type.size);
    const uint64_t available = bytes.size() - header_start - header_len;
    if (available < data_bytes) {
        BadInput(label + ": truncated data (shape " + ShapeString(array.shape) + " of " + NpyTypeName(array.type) +
                 " needs " + std::to_string(data_bytes) + " bytes, file has " + std::to_string(available) + ")");
    }
    if (available > data_bytes) {
        BadInput(label + ": " + std::to_string(available - data_bytes) + " unexpected bytes after the data of shape " +
                 ShapeString(array.shape) + " (corrupt or not written by NumPy)");
    }
    const uint8_t *src = bytes.data() + header_start + header_len;
    const size_t size = static_cast<size_t>(descr.type.size);
    array.data.resize(static_cast<size_t>(data_bytes));

    // Fortran order: element (i0, i1, ..., ik) sits at i0 + d0 * (i1 + d1 * (...)); walk the C-order indices with an
    // odometer and fetch from there. Byte swapping happens on the way.
    const size_t rank = array.shape.size();
    const bool transpose = array.was_fortran_order && rank > 1 && count > 0;
    std::vector<int64_t> index(rank, 0);
    std::vector<uint64_t> f_stride(rank, 1);
    for (size_t k = 1; k < rank; ++k) f_stride[k] = f_stride[k - 1] * static_cast<uint64_t>(array.shape[k - 1]);
    uint64_t f_offset = 0;
    for (uint64_t i = 0; i < count; ++i) {
        const uint64_t from = transpose ? f_offset : i;
        const uint8_t *element = src + from * size;
        uint8_t *dst = array.data.data() + i * size;
        if (descr.big_endian) {
            for (size_t b = 0; b < size; ++b) dst[b] = element[size - 1 - b];
        } else {
            std::memcpy(dst, element, size);
        }
        if (transpose) {
            for (size_t k = rank; k-- > 0;) {  // advance the C-order odometer, last axis fastest
                ++index[k];
                f_offset += f_stride[k];
                if (index[k] < array.shape[k]) break;
                f_offset -= f_stride[k] * static_cast<uint64_t>(array.shape[k]);
                index[k] = 0;
            }
        }
    }
    if (array.type.kind == NpyKind::kBool) {
        for (uint8_t v : array.data) {
            if (v > 1) BadInput(label + ": bool array holds a byte other than 0 or 1");
        }
    }
    return array;
}

NpyArray ReadNpy(const std::string &path, const std::string &what) {
    const std::string label = what + " " + path;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) BadInput(label + ": cannot open (" + std::strerror(errno) + ")");
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        BadInput(label + ": not a regular file");
    }
    std::vector<uint8_t> bytes;
    try {
        bytes.resize(static_cast<size_t>(st.st_size));
    } catch (const std::bad_alloc &) {
        ::close(fd);
        Failure(label + ": file of " + std::to_string(st.st_size) + " bytes does not fit in memory");
    }
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t got = ::read(fd, bytes.data() + done, bytes.size() - done);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            const int error = errno;
            ::close(fd);
            BadInput(label + ": read failed (" + (got < 0 ? std::strerror(error) : "file shrank while reading") + ")");
        }
        done += static_cast<size_t>(got);
    }
    ::close(fd);
    return ParseNpy(bytes, label);
}

std::vector<uint8_t> SerializeNpy(NpyType type, const std::vector<int64_t> &shape, const void *data) {
    std::string dict = "{'descr': '" + NpyDescr(type) + "', 'fortran_order': False, 'shape': " + ShapeString(shape) + ", }";
    // Pad with spaces and end with a newline so that magic + length + header is a multiple of 64 (NumPy's layout).
    int major = 1;
    size_t prefix = 10;
    size_t total = prefix + dict.size() + 1;
    if ((total + 63) / 64 * 64 - prefix > 65535) {
        major = 2;
        prefix = 12;
        total = prefix + dict.size() + 1;
    }
    const size_t padded = (total + 63) / 64 * 64;
    dict.append(padded - total, ' ');
    dict += '\n';
    const size_t header_len = dict.size();
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    const size_t data_bytes = static_cast<size_t>(count) * static_cast<size_t>(type.size);

    std::string prefix_bytes("\x93NUMPY", 6);
    prefix_bytes += static_cast<char>(major);
    prefix_bytes += '\0';
    for (int k = 0; k < (major == 1 ? 2 : 4); ++k) prefix_bytes += static_cast<char>((header_len >> (8 * k)) & 0xff);
    const std::string head = prefix_bytes + dict;
    std::vector<uint8_t> out(head.size() + data_bytes);
    std::memcpy(out.data(), head.data(), head.size());
    if (data_bytes > 0) std::memcpy(out.data() + head.size(), data, data_bytes);
    return out;
}

// ---- all-or-nothing outputs ---------------------------------------------------------------------------------

static std::string DirectoryOf(const std::string &path) {
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

void AtomicOutputs::CheckWritable(const std::string &path, const std::string &what) {
    const std::string dir = DirectoryOf(path);
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        BadInput(what + " " + path + ": directory '" + dir + "' does not exist");
    }
    if (::access(dir.c_str(), W_OK) != 0) BadInput(what + " " + path + ": directory '" + dir + "' is not writable");
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) BadInput(what + " " + path + ": is a directory");
}

void AtomicOutputs::Stage(const std::string &path, const std::string &what, NpyType type,
                          const std::vector<int64_t> &shape, const void *data) {
    const std::vector<uint8_t> bytes = SerializeNpy(type, shape, data);
    StageBytes(path, what, bytes.data(), bytes.size());
}

void AtomicOutputs::StageText(const std::string &path, const std::string &what, const std::string &text) {
    StageBytes(path, what, reinterpret_cast<const uint8_t *>(text.data()), text.size());
}

void AtomicOutputs::StageBytes(const std::string &path, const std::string &what, const uint8_t *bytes, size_t size) {
    std::string temp = path + ".tmp-XXXXXX";
    std::vector<char> name(temp.begin(), temp.end());
    name.push_back('\0');
    const int fd = ::mkstemp(name.data());
    if (fd < 0) BadInput(what + " " + path + ": cannot create a temporary file (" + std::strerror(errno) + ")");
    temp = name.data();
    pending_.push_back({temp, path, what});
    size_t done = 0;
    while (done < size) {
        const ssize_t put = ::write(fd, bytes + done, size - done);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) {
            const int error = errno;
            ::close(fd);
            Failure(what + " " + path + ": write failed (" + std::strerror(error) + ")");
        }
        done += static_cast<size_t>(put);
    }
    // mkstemp creates 0600; give the file the permissions an ordinary new file would get.
    const mode_t mask = ::umask(0);
    ::umask(mask);
    ::fchmod(fd, 0666 & ~mask);
    if (::fsync(fd) != 0 || ::close(fd) != 0) Failure(what + " " + path + ": write failed (" + std::strerror(errno) + ")");
}

void AtomicOutputs::Commit() {
    for (size_t i = 0; i < pending_.size(); ++i) {
        if (::rename(pending_[i].temp_path.c_str(), pending_[i].final_path.c_str()) != 0) {
            const int error = errno;
            // Earlier files are already in place; say so rather than pretend nothing happened.
            std::string message = pending_[i].what + " " + pending_[i].final_path + ": rename failed (" +
                                  std::strerror(error) + ")";
            if (i > 0) message += "; " + std::to_string(i) + " earlier output(s) were already written";
            pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(i));
            Failure(message);
        }
    }
    pending_.clear();
}

AtomicOutputs::~AtomicOutputs() {
    for (const Pending &p : pending_) ::unlink(p.temp_path.c_str());
}

}  // namespace openaclnn_cli
