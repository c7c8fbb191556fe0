#include "loom/perf/catalog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "loom/core/error.h"

namespace loom::perf {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::string& text) {
  Catalog c = Catalog::builtin();
  try {
    c.load_text(text, "mine.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Catalog, BuiltinHasSourcedRowsAndTheNamedParts) {
  Catalog c = Catalog::builtin();
  EXPECT_GE(c.gpus().size(), 25u);
  for (const auto& [n, g] : c.gpus()) EXPECT_FALSE(g.source.empty()) << n;
  for (const auto& [n, l] : c.links()) EXPECT_FALSE(l.source.empty()) << n;
  for (const char* l :
       {"pcie3", "pcie4", "pcie5", "nvlink1", "nvlink2", "nvlink3", "nvlink4", "nvlink5", "ib-fdr",
        "ib-edr", "ib-hdr", "ib-ndr", "ib-xdr", "10gbe", "100gbe", "400gbe"})
    EXPECT_TRUE(c.has_link(l)) << l;
  EXPECT_DOUBLE_EQ(c.gpu("h100-sxm").tensor_tflops, 989.4);
  EXPECT_DOUBLE_EQ(c.link("pcie3").gbs, 15.75);
  EXPECT_DOUBLE_EQ(c.storage("sata-ssd").read_mbs, 550);
  EXPECT_EQ(c.intra_link_of(c.gpu("rtx-4090")).name, "pcie4");
  EXPECT_EQ(c.intra_link_of(c.gpu("v100-sxm2")).name, "nvlink2");
}

TEST(Catalog, UnknownNamesListCloseMatches) {
  Catalog c = Catalog::builtin();
  try {
    c.gpu("rtx3090");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown GPU 'rtx3090'; close matches: rtx-3090"));
  }
  try {
    c.link("nvlnk4");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("nvlink4"));
  }
}

TEST(Catalog, BadRowsNameFileEntryAndField) {
  const std::string row =
      "[[link]]\nname = \"myib\"\nkind = \"infiniband\"\nlatency_us = 1\nsource = \"me\"\n";
  EXPECT_THAT(error_of(row), HasSubstr("mine.toml: link 'myib' (line 1): field 'gbs' is missing"));
  EXPECT_THAT(error_of(row + "gbs = -3\n"), HasSubstr("field 'gbs' must be > 0, got -3"));
  EXPECT_THAT(error_of(row + "gbs = 0\n"), HasSubstr("field 'gbs' must be > 0, got 0"));
  EXPECT_THAT(error_of(row + "gbs = \"fast\"\n"), HasSubstr("field 'gbs' must be a number"));
  EXPECT_THAT(error_of(row + "gbs = 5\nspeed = 3\n"),
              HasSubstr("field 'speed' is not a known field"));
  EXPECT_THAT(
      error_of("[[gpu]]\nname = \"x\"\nfp32_tflops = 1\ntensor_tflops = 0\nmemory_gb = 8\n"
               "mem_bw_gbs = 100\nhost_link = \"pcie9\"\npeer_link = \"none\"\ntdp_w = 100\nsource "
               "= \"s\"\n"),
      HasSubstr("gpu 'x' (line 1): field 'host_link' unknown link 'pcie9'; close matches: pcie3"));
  EXPECT_THAT(error_of("[[rate]]\ngpu = \"v100-sxm2\"\nworkload = \"resnet50\"\nprecision = "
                       "\"mixed\"\nbatch = 8\nsamples_per_s = 9\nsource = \"s\"\nlayout = "
                       "\"nwhc\"\n"),
              HasSubstr("field 'layout' must be nhwc (channels-last) or nchw, got 'nwhc'"));
  const std::string gpu =
      "[[gpu]]\nname = \"x\"\nfp32_tflops = 1\ntensor_tflops = 0\nmemory_gb = 8\n"
      "mem_bw_gbs = 100\nhost_link = \"pcie4\"\npeer_link = \"none\"\ntdp_w = 100\n"
      "form_factor = \"pcie\"\nslots = 2\nsource = \"s\"\n";
  // An L2 figure needs its source; a negative one is refused.
  EXPECT_THAT(error_of(gpu + "l2_mib = 40\n"), HasSubstr("field 'l2_source' is missing"));
  EXPECT_THAT(error_of(gpu + "l2_mib = -1\nl2_source = \"s\"\n"),
              HasSubstr("field 'l2_mib' must be"));
  EXPECT_THAT(error_of("[[disk]]\nname = 1\n"), HasSubstr("unknown section 'disk'"));
  EXPECT_THAT(error_of("[[gpu]\n"), HasSubstr("mine.toml:1: TOML syntax error"));
}

TEST(Catalog, UserRowsAddAndReplace) {
  Catalog c = Catalog::builtin();
  c.load_text(
      "[[gpu]]\nname = \"rtx-4090\"\nfp32_tflops = 80\ntensor_tflops = 160\nmemory_gb = 24\n"
      "mem_bw_gbs = 1000\nhost_link = \"pcie4\"\npeer_link = \"none\"\ntdp_w = 450\nprice_usd = "
      "1800\n"
      "form_factor = \"pcie\"\nslots = 3\nsource = \"my shop\"\n",
      "mine.toml");
  EXPECT_DOUBLE_EQ(c.gpu("rtx-4090").price_usd, 1800);
  EXPECT_EQ(c.gpu("rtx-4090").source, "my shop");
}

}  // namespace
}  // namespace loom::perf
