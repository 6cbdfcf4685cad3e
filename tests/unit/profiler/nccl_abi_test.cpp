// profiler/nccl_abi.h mirrors nccl.h: every value the interposition library relies on is checked
// against the real header where NCCL is installed (the CUDA builds).
#include <gtest/gtest.h>

#if __has_include(<nccl.h>)
#include <nccl.h>
namespace mirror {
#define PARTRAIN_NCCL_ABI_TYPES_ONLY
#include "profiler/nccl_abi.h"
}  // namespace mirror
#define PARTRAIN_HAVE_NCCL_HEADER 1
#endif

namespace partrain::profiler {
namespace {

TEST(NcclAbi, MirrorsTheRealHeader) {
#ifdef PARTRAIN_HAVE_NCCL_HEADER
  EXPECT_EQ(sizeof(mirror::ncclUniqueId), sizeof(::ncclUniqueId));
  EXPECT_EQ(PARTRAIN_NCCL_UNIQUE_ID_BYTES, NCCL_UNIQUE_ID_BYTES);
  EXPECT_EQ(PARTRAIN_NCCL_SPLIT_NOCOLOR, NCCL_SPLIT_NOCOLOR);
  EXPECT_EQ(sizeof(mirror::ncclDataType_t), sizeof(::ncclDataType_t));
  EXPECT_EQ(sizeof(mirror::ncclRedOp_t), sizeof(::ncclRedOp_t));
  EXPECT_EQ(sizeof(mirror::ncclResult_t), sizeof(::ncclResult_t));
  EXPECT_EQ(int{mirror::ncclInt8}, int{::ncclInt8});
  EXPECT_EQ(int{mirror::ncclUint8}, int{::ncclUint8});
  EXPECT_EQ(int{mirror::ncclInt32}, int{::ncclInt32});
  EXPECT_EQ(int{mirror::ncclUint32}, int{::ncclUint32});
  EXPECT_EQ(int{mirror::ncclInt64}, int{::ncclInt64});
  EXPECT_EQ(int{mirror::ncclUint64}, int{::ncclUint64});
  EXPECT_EQ(int{mirror::ncclFloat16}, int{::ncclFloat16});
  EXPECT_EQ(int{mirror::ncclFloat32}, int{::ncclFloat32});
  EXPECT_EQ(int{mirror::ncclFloat64}, int{::ncclFloat64});
  EXPECT_EQ(int{mirror::ncclBfloat16}, int{::ncclBfloat16});
  EXPECT_EQ(int{mirror::ncclFloat8e4m3}, int{::ncclFloat8e4m3});
  EXPECT_EQ(int{mirror::ncclFloat8e5m2}, int{::ncclFloat8e5m2});
  EXPECT_EQ(int{mirror::ncclSum}, int{::ncclSum});
  EXPECT_EQ(int{mirror::ncclProd}, int{::ncclProd});
  EXPECT_EQ(int{mirror::ncclMax}, int{::ncclMax});
  EXPECT_EQ(int{mirror::ncclMin}, int{::ncclMin});
  EXPECT_EQ(int{mirror::ncclAvg}, int{::ncclAvg});
  EXPECT_EQ(int{mirror::ncclSuccess}, int{::ncclSuccess});
  EXPECT_EQ(int{mirror::ncclInvalidArgument}, int{::ncclInvalidArgument});
  EXPECT_EQ(int{mirror::ncclRemoteError}, int{::ncclRemoteError});
  EXPECT_EQ(int{mirror::ncclInProgress}, int{::ncclInProgress});
#else
  GTEST_SKIP() << "nccl.h is not installed: nothing to compare the mirror with";
#endif
}

}  // namespace
}  // namespace partrain::profiler
