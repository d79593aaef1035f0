// A small, strict reader and writer of NumPy's .npy format (versions 1.0, 2.0 and 3.0).
//
// Reading accepts the plain numeric dtypes ('<f4', '>f2', '|u1', '<i8', ...): big-endian data is byte-swapped and
// Fortran-order data is transposed, so a loaded array is always little-endian (host order) in C order. Everything
// else is refused with an error naming the file: structured or object dtypes, a bad magic or header, a shape that
// does not fit in memory, data shorter than the shape says (truncated) or longer (trailing bytes).
//
// Writing goes to a temporary file in the destination's directory that is renamed over the destination only once
// it is complete, so a failure never leaves a half-written output.
#ifndef OPENACLNN_TOOLS_NPY_H_
#define OPENACLNN_TOOLS_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace openaclnn_cli {

enum class NpyKind { kFloat, kSignedInt, kUnsignedInt, kBool };

struct NpyType {
    NpyKind kind;
    int size;  // bytes per element
    bool operator==(const NpyType &other) const { return kind == other.kind && size == other.size; }
};

// "float32", "int64", "uint16", "bool", ...
std::string NpyTypeName(NpyType type);
// The little-endian descr NumPy writes: "<f4", "|u1", ...
std::string NpyDescr(NpyType type);

struct NpyArray {
    NpyType type{NpyKind::kFloat, 4};
    std::vector<int64_t> shape;  // empty: a 0-d array holding one element
    std::vector<uint8_t> data;   // little-endian, C order, NumElements() * type.size bytes
    bool was_fortran_order = false;
    bool was_big_endian = false;

    int64_t NumElements() const;
};

// Reads path; `what` names the flag it came from in messages ("--log-prob"). Errors are CliError status 2.
NpyArray ReadNpy(const std::string &path, const std::string &what);

// Parses the bytes of a whole .npy file (exposed for tests).
NpyArray ParseNpy(const std::vector<uint8_t> &bytes, const std::string &label);

// Serialises an array (C order, little-endian data) as .npy version 1.0 (2.0 when the header needs it).
std::vector<uint8_t> SerializeNpy(NpyType type, const std::vector<int64_t> &shape, const void *data);

// Writes the files of a command all or nothing: Stage() writes each to a temporary name next to its destination,
// Commit() renames them all; a destroyed writer that was not committed removes its temporaries.
class AtomicOutputs {
public:
    AtomicOutputs() = default;
    AtomicOutputs(const AtomicOutputs &) = delete;
    AtomicOutputs &operator=(const AtomicOutputs &) = delete;
    ~AtomicOutputs();

    // Checks early (before any computation) that path's directory is writable; `what` names the flag.
    static void CheckWritable(const std::string &path, const std::string &what);

    void Stage(const std::string &path, const std::string &what, NpyType type, const std::vector<int64_t> &shape,
               const void *data);
    // Any other content (e.g. an SVG picture).
    void StageText(const std::string &path, const std::string &what, const std::string &text);
    void Commit();

private:
    void StageBytes(const std::string &path, const std::string &what, const uint8_t *bytes, size_t size);
    struct Pending {
        std::string temp_path;
        std::string final_path;
        std::string what;
    };
    std::vector<Pending> pending_;
};

}  // namespace openaclnn_cli

#endif  // OPENACLNN_TOOLS_NPY_H_
