#include "loom/perf/host_fit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "loom/core/error.h"

namespace loom::perf {
namespace {

using ::testing::HasSubstr;

// Hand-checked against the catalog rows (data/hardware/catalog.toml). Load limit = 90% of the
// PSUs; draw = n x TDP + the host's load.
struct FitCase {
  const char* host;
  const char* gpu;
  int n;
  bool fits;
  const char* expect;  // the link's name when it fits, a piece of the reason when not
  double draw_w;
};

TEST(HostFit, HandCheckedTable) {
  const Catalog cat = Catalog::builtin();
  const FitCase cases[] = {
      // desktop: 850 W PSU (765 W at 90%), host 200 W, 7 slots, 16 CPU lanes.
      {"desktop", "rtx-4090", 1, true, "pcie3 x16", 450 + 200},  // a Gen3 board
      {"desktop", "rtx-4090", 2, false, "1100 W at load", 2 * 450 + 200},
      {"desktop", "rtx-5090", 1, false, "775 W at load", 575 + 200},
      {"desktop", "gtx-1080", 2, true, "pcie3 x8", 2 * 180 + 200},  // 16 lanes: x8/x8
      {"desktop", "rtx-2080-ti", 2, true, "nvlink2-bridge", 2 * 250 + 200},
      {"desktop", "rtx-2080-ti", 4, false, "holds 1 to 2", 4 * 250 + 200},
      // workstation: 1600 W (1440 W), host 360 W, 8 slots, 40 lanes.
      {"workstation", "rtx-5090", 1, true, "pcie3 x16", 575 + 360},
      {"workstation", "rtx-5090", 2, false, "1510 W at load", 2 * 575 + 360},
      {"workstation", "rtx-4090", 2, true, "pcie3 x16", 2 * 450 + 360},  // Gen3 slots, 40 lanes
      {"workstation", "rtx-3090", 2, true, "nvlink3-bridge", 2 * 350 + 360},
      {"workstation", "rtx-3090", 4, false, "need 12 slots, it has 8", 4 * 350 + 360},
      {"workstation", "rtx-2080-ti", 4, true, "pcie3 x8", 4 * 250 + 360},  // a bridge joins 2
      // the four-GPU box: 2 x 1600 W (2880 W), host 360 W, x16 PCIe 5.0 each.
      {"gpu-box-4", "rtx-5090", 4, true, "pcie5 x16", 4 * 575 + 360},
      {"gpu-box-4", "rtx-5090", 8, false, "holds 1 to 4", 8 * 575 + 360},
      // the eight-GPU server: 4 x 2000 W (7200 W), host 1400 W.
      {"gpu-server-8", "rtx-5090", 8, true, "pcie5 x16", 8 * 575 + 1400},
      {"gpu-server-8", "rtx-4090", 8, true, "pcie4 x16", 8 * 450 + 1400},
      {"gpu-server-8", "l40s", 8, true, "pcie4 x16", 8 * 350 + 1400},
      // passively cooled cards only where a server's airflow cools them.
      {"desktop", "l40s", 1, false, "passively cooled", 350 + 200},
      {"workstation", "a100-80gb-pcie", 1, false, "passively cooled", 300 + 360},
      // baseboards: their own modules, eight of them.
      {"hgx-h100", "h100-sxm", 8, true, "nvlink4", 8 * 700 + 4600},
      {"hgx-h100", "h100-sxm", 4, false, "exactly 8", 4 * 700 + 4600},
      {"hgx-a100", "a100-80gb-sxm4", 8, true, "nvlink3", 8 * 400 + 3300},
      {"hgx-b200", "b200", 8, true, "nvlink5", 8 * 1000 + 6300},
      {"hgx-a100", "h100-sxm", 8, false, "only on its hgx-h100 baseboard", 8 * 700 + 3300},
      {"gpu-server-8", "h100-sxm", 8, false, "only on its hgx-h100 baseboard", 8 * 700 + 1400},
      {"hgx-h100", "h100-pcie", 8, false, "does not mount on the hgx-h100", 8 * 350 + 4600},
  };
  for (const FitCase& c : cases) {
    SCOPED_TRACE(fmt::format("{} x {} in {}", c.n, c.gpu, c.host));
    const HostFit f = fit_host(cat, cat.host(c.host), cat.gpu(c.gpu), c.n);
    EXPECT_EQ(f.fits, c.fits) << f.why_not;
    EXPECT_DOUBLE_EQ(f.draw_w, c.draw_w);
    if (c.fits)
      EXPECT_EQ(f.intra.name, c.expect);
    else
      EXPECT_THAT(f.why_not, HasSubstr(c.expect));
  }
  // The link's rate: the slower generation of card and slot at the lanes each card gets.
  EXPECT_DOUBLE_EQ(fit_host(cat, cat.host("desktop"), cat.gpu("gtx-1080"), 2).intra.gbs, 15.75 / 2);
  EXPECT_DOUBLE_EQ(fit_host(cat, cat.host("workstation"), cat.gpu("rtx-4090"), 2).intra.gbs, 15.75);
  EXPECT_DOUBLE_EQ(fit_host(cat, cat.host("gpu-server-8"), cat.gpu("rtx-5090"), 8).intra.gbs, 63);
}

TEST(HostFit, NoSxmOrOamModuleFitsAnyPcieHostAndNoCardFitsABaseboard) {
  const Catalog cat = Catalog::builtin();
  int modules = 0;
  for (const auto& [gn, g] : cat.gpus()) {
    for (const auto& [hn, h] : cat.hosts()) {
      for (int n = 1; n <= 8; n *= 2) {
        const HostFit f = fit_host(cat, h, g, n);
        if (!f.fits) continue;
        if (g.is_module()) {
          EXPECT_EQ(h.form_factor, g.form_factor) << gn << " in " << hn;
          EXPECT_EQ(h.baseboard, g.baseboard) << gn << " in " << hn;
          ++modules;
        } else {
          EXPECT_EQ(h.form_factor, "pcie") << gn << " in " << hn;
        }
      }
    }
  }
  EXPECT_EQ(modules, 4);  // 8 on hgx-a100 (A100 40GB and 80GB), hgx-h100, hgx-b200
}

TEST(HostFit, EightRtx5090FitOnlyTheEightGpuServer) {
  const Catalog cat = Catalog::builtin();
  std::vector<std::string> carriers;
  for (const auto& [hn, h] : cat.hosts())
    if (fit_host(cat, h, cat.gpu("rtx-5090"), 8).fits) carriers.push_back(hn);
  EXPECT_EQ(carriers, std::vector<std::string>{"gpu-server-8"});
  EXPECT_EQ(max_gpus_in(cat, cat.host("desktop"), cat.gpu("rtx-5090"), 8), 0);
  EXPECT_EQ(max_gpus_in(cat, cat.host("workstation"), cat.gpu("rtx-5090"), 8), 1);
  EXPECT_EQ(max_gpus_in(cat, cat.host("gpu-box-4"), cat.gpu("rtx-5090"), 8), 4);
}

TEST(HostFit, CircuitsAtEightyPercentOfTheBreaker) {
  EXPECT_THAT(circuit_for(650), HasSubstr("one 120 V 15 A circuit (1440 W continuous)"));
  EXPECT_THAT(circuit_for(1500), HasSubstr("one 120 V 20 A circuit (1920 W continuous)"));
  EXPECT_THAT(circuit_for(2660), HasSubstr("one 240 V 20 A circuit (3840 W continuous)"));
  EXPECT_THAT(circuit_for(5000), HasSubstr("one 240 V 30 A circuit (5760 W continuous)"));
  EXPECT_THAT(circuit_for(10200), HasSubstr("2 x 240 V 30 A circuits"));
  EXPECT_NEAR(btu_per_hour(1000), 3412, 1e-9);
}

TEST(HostFit, CatalogRowsWithoutSlotsTdpOrBaseboardAreErrorsNamingTheRow) {
  auto error_of = [](const std::string& row) -> std::string {
    Catalog c = Catalog::builtin();
    try {
      c.load_text(row, "mine.toml");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  const std::string card =
      "[[gpu]]\nname = \"x\"\nfp32_tflops = 1\ntensor_tflops = 0\nmemory_gb = 8\nmem_bw_gbs = "
      "100\nhost_link = \"pcie4\"\npeer_link = \"none\"\nsource = \"s\"\n";
  EXPECT_THAT(error_of(card + "tdp_w = 100\nform_factor = \"pcie\"\n"),
              HasSubstr("mine.toml: gpu 'x' (line 1): field 'slots' is missing"));
  EXPECT_THAT(error_of(card + "form_factor = \"pcie\"\nslots = 2\n"),
              HasSubstr("mine.toml: gpu 'x' (line 1): field 'tdp_w' is missing"));
  EXPECT_THAT(error_of(card + "tdp_w = 100\nform_factor = \"sxm\"\n"),
              HasSubstr("gpu 'x' (line 1): field 'baseboard' is missing"));
  EXPECT_THAT(error_of(card + "tdp_w = 100\nform_factor = \"mxm\"\n"),
              HasSubstr("field 'form_factor' must be pcie, sxm, oam or machine"));
  EXPECT_THAT(error_of("[[host]]\nname = \"h\"\nkind = \"desktop\"\n"),
              HasSubstr("host 'h' (line 1): field 'description' is missing"));
  EXPECT_EQ(error_of(card + "tdp_w = 100\nform_factor = \"pcie\"\nslots = 2\n"), "");
}

}  // namespace
}  // namespace loom::perf
