"""Stage 4's contract with stage 3: the plan instruction set, node and operand kinds, error
codes and the status layout (and the one function that writes it), by name, in one place.

``arrowkafka.plan`` writes programs with these numbers, the kernels (``decode.py``,
``encode.py``) and the generated kernels (``arrowkafka.codegen``) read them, and the codec
reads errors back out of the status array by these slot names. Plain Python, so that
importing it costs neither Numba nor pyarrow (Numba freezes module-level ints into the
compiled kernels).
"""

# ---- instructions: [op, node, a, b, c, d, e, f], int32 -------------------------------------------
# Each op with its operands (after ``node``, the output node it writes).
OPS = [
    "END",  # message done
    # node, enc (0 fixed signed, 1 fixed unsigned, 2 zigzag varint, 3 unsigned varint),
    # wire bytes (fixed) or bits (varint), output width
    "INT",
    "VARBIN",  # node, length kind, wire nullable, utf8
    "LIST",  # node, length kind, wire nullable, - (unused, 0), pc after LIST_NEXT
    "LIST_NEXT",  # loop back or pop
    "LIST_FIXED",  # node, child, length kind, wire nullable, element kind, element bytes
    "STRUCT",  # node: one slot (validity 1 if the node has validity)
    "NSTRUCT",  # node, marker (0 int8 -1/1, 1 uvarint 0/1), pc after body, default pc
    # map node, key node, value node, known-tags table start, count, no-frame flag (1 when
    # no tag is known: unknown tags are kept and no TAGGED/SECTION_END follows), the struct's
    # _tags_present list node (-1: none): known tags seen are appended to it
    "TAGS",
    "OPTBUF",  # same, for the draft's optional-field buffer
    "TAGGED",  # node of the field, tag, value pc, default pc
    "SECTION_END",  # continue after the tag section / optional buffer
    "RET",  # end of an out-of-line segment
    "DEF_FIXED",  # node, const index, width
    "DEF_VARBIN",  # node, const byte start, length, is null
    "DEF_LIST",  # node, is null
    "DEF_STRUCT",  # node, is null
    "DEF_MAP",  # map node: an empty map
    "DEF_UUID",  # node, const byte start (16 bytes)
    # -, first row of the run table, rows, total wire bytes: consecutive fixed-width fields
    # (one bounds check, one dispatch); each run row is (node, element kind, wire bytes, out width)
    "FIXED_RUN",
]
OP = {name: i for i, name in enumerate(OPS)}
END, INT, VARBIN, LIST, LIST_NEXT, LIST_FIXED, STRUCT, NSTRUCT, TAGS, OPTBUF, TAGGED = range(11)
SECTION_END, RET, DEF_FIXED, DEF_VARBIN, DEF_LIST, DEF_STRUCT, DEF_MAP, DEF_UUID, FIXED_RUN = range(11, 20)

# ---- operand kinds --------------------------------------------------------------------------------
# INT encodings
ENC_FIXED, ENC_FIXED_UNSIGNED, ENC_ZIGZAG, ENC_UVARINT = range(4)
# length and count encodings (VARBIN, LIST, LIST_FIXED)
LEN_INT16, LEN_INT32, LEN_UVARINT = range(3)
# fixed-width element kinds (LIST_FIXED, FIXED_RUN rows)
EL_INT, EL_UINT, EL_F64, EL_BOOL, EL_UUID = range(5)

# ---- output node kinds (one per Arrow array; not opcodes) -----------------------------------------
K_STRUCT, K_LIST, K_FIXED, K_VARBIN, K_MAP = range(5)
KIND_NAMES = ["struct", "list", "fixed", "varbin", "map"]

# ---- error codes ----------------------------------------------------------------------------------
OK = 0
E_TRUNCATED = 1  # a read runs past the end of the body (d1 bytes needed, 0 for a varint; d2 left)
E_FORGED_COUNT = 2  # an array count over the bytes left (d1 elements, d2 bytes)
E_NEGATIVE = 3  # a length or count below -1
E_NULL = 4  # null in a field not nullable in this version (an array element never is)
E_UTF8 = 5  # a string that is not UTF-8
E_VARINT_LONG = 6  # a varint longer than its type allows
E_VARINT_BIG = 7  # a varint whose value does not fit its type
E_MARKER = 8  # a nullable-struct marker other than -1/1 (0/1 when tagged)
E_TAG_ORDER = 9  # tags not strictly ascending
E_TAG_SIZE = 10  # a tagged (or optional) field whose value does not fill its size exactly
E_TRAILING = 11  # bytes left over after the last field
# encoding
E_RANGE = 12  # a value too wide for its wire encoding (KIP-625 fixed32 of an int64 field)
E_LONG_STRING = 13  # a STRING over MAX_STRING bytes (encoding; and decoding a compact one)
E_SIZE = 14  # pass 2 wrote a different size than pass 1 counted (a kernel bug)

MAX_STRING = 32767  # Kafka refuses a longer string (Short.MAX_VALUE) in every version

# ---- status array: the first failure of a kernel call ---------------------------------------------
S_CODE = 0  # error code
S_MESSAGE = 1  # index of the message (row) that failed
S_OFFSET = 2  # byte offset inside the message (decode)
S_PC = 3  # the instruction that failed
S_D1, S_D2 = 4, 5  # two details for the reason (sizes, values, tags)
S_DEPTH = 6  # how many list indices follow
S_INDICES = 7  # list indices, outermost first, up to MAX_INDICES
MAX_INDICES = 8
S_RUN_ROW = 15  # the FIXED_RUN row that failed, or -1
STATUS_SIZE = 16

# ---- kernel stack frame kinds ---------------------------------------------------------------------
F_LIST, F_CALL, F_SECTION = 1, 2, 3


def write_status(status, err, i, offset, pc, d1, d2, stack, sp, run_row):
    """Write a kernel's first failure into ``status``; the list indices are read off its stack
    of LIST frames (remaining of total), outermost first. Plain Python: each kernel compiles
    it in (``njit(write_status)``), and the plain-Python tier runs it as it is."""
    status[S_CODE] = err
    status[S_MESSAGE] = i
    status[S_OFFSET] = offset
    status[S_PC] = pc
    status[S_D1] = d1
    status[S_D2] = d2
    depth = 0
    for k in range(sp):
        if stack[k, 0] == F_LIST and depth < MAX_INDICES:
            status[S_INDICES + depth] = stack[k, 3] - stack[k, 2]
            depth += 1
    status[S_DEPTH] = depth
    status[S_RUN_ROW] = run_row
