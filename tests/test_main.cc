#include <ATen/Parallel.h>
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // ctest runs one test process per core: a second intra-op thread per
  // process oversubscribes the cores, and spinning worker threads slow the
  // law tests' many small ops tenfold.
  at::set_num_threads(1);
  return RUN_ALL_TESTS();
}
