"""The kernel's instruction set, error codes and status layout: plain constants, so the
decoder can read them without importing Numba."""

# ops, in the order of arrowkafka.plan.OPS (a test checks)
OPS = (
    "END INT VARBIN LIST LIST_NEXT LIST_FIXED STRUCT NSTRUCT TAGS OPTBUF TAGGED SECTION_END RET "
    "DEF_FIXED DEF_VARBIN DEF_LIST DEF_STRUCT DEF_MAP DEF_UUID FIXED_RUN"
).split()
END, INT, VARBIN, LIST, LIST_NEXT, LIST_FIXED, STRUCT, NSTRUCT, TAGS, OPTBUF, TAGGED = range(11)
SECTION_END, RET, DEF_FIXED, DEF_VARBIN, DEF_LIST, DEF_STRUCT, DEF_MAP, DEF_UUID, FIXED_RUN = range(11, 20)

# error codes
OK = 0
E_TRUNCATED = 1  # a read runs past the end of the body
E_FORGED_COUNT = 2  # an array count the remaining bytes cannot hold
E_NEGATIVE = 3  # a length or count below -1
E_NULL = 4  # null in a field not nullable in this version
E_UTF8 = 5  # a string that is not UTF-8
E_VARINT_LONG = 6  # a varint longer than its type allows
E_VARINT_BIG = 7  # a varint whose value does not fit its type
E_MARKER = 8  # a nullable-struct marker other than -1/1 (0/1 when tagged)
E_TAG_ORDER = 9  # tags not strictly ascending
E_TAG_SIZE = 10  # a tagged (or optional) field whose value does not fill its size exactly
E_TRAILING = 11  # bytes left over after the last field
# encoding
E_RANGE = 12  # a value too wide for its wire encoding (KIP-625 fixed32 of an int64 field)
E_LONG_STRING = 13  # a classic STRING over 32767 bytes
E_SIZE = 14  # pass 2 wrote a different size than pass 1 counted (a kernel bug)

STATUS_SIZE = 16
MAX_INDICES = 8

# frame kinds
F_LIST, F_CALL, F_SECTION = 1, 2, 3
