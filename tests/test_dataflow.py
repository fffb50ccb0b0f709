"""Closed-form dataflow models (sim.model.dataflow) against independent truth.

* SCALE-Sim 3.0.0 itself: the table below was produced by running PyPI ``scalesim==3.0.0``
  (CALC bandwidth mode, 4 MiB SRAMs, so no stalls) on every listed GEMM and reading its
  COMPUTE_REPORT / DETAILED_ACCESS_REPORT.  Columns: dataflow, array rows R, array cols C,
  M, K, N, "Total Cycles", "SRAM IFMAP Reads", "SRAM Filter Reads", "SRAM OFMAP Writes",
  "Mapping Efficiency %", "Compute Util %", "Overall Util %".  (SCALE-Sim's topology row is
  ``name, M, N, K``; K is the reduction.)  The 1x1x1 OS GEMM on a 1x1 array is absent:
  SCALE-Sim raises ZeroDivisionError on it ("Total Cycles" would be 0).
* SCALE-Sim's fold loops re-derived fold by fold (systolic_compute_{os,ws,is}.py).
* Hand-computed small cases and invariants.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from sim.spec.dataflow_spec import DataflowSpec
from sim.model.dataflow import (
    ACCESS_FIELDS,
    FoldReport,
    RowStationaryDataflow,
    SystolicDataflow,
    clear_cache,
    dataflow_dir,
    fold_report,
    gemm_accesses,
    gemm_compute_cycles,
    get_dataflow,
    list_dataflows,
)
from sim.errors import ConfigError, ShapeError, UnknownNameError

# (df, R, C, M, K, N, total, ifmap_reads, filter_reads, ofmap_writes, map_eff%, compute_util%, overall_util%)
SCALESIM_3_0_0_GEMM = [
    ('os', 4, 4, 4, 4, 4, 9, 16, 16, 24, 100.0, 40.0, 44.44444444444444),
    ('os', 4, 4, 5, 7, 3, 25, 35, 42, 31, 46.875, 25.240384615384613, 26.25),
    ('os', 4, 4, 9, 2, 6, 47, 36, 36, 102, 56.25, 14.0625, 14.361702127659575),
    ('os', 4, 4, 1, 1, 1, 6, 1, 1, 9, 6.25, 0.8928571428571428, 1.0416666666666667),
    ('os', 4, 4, 16, 12, 10, 215, 576, 480, 256, 83.33333333333334, 55.55555555555555, 55.81395348837209),
    ('os', 4, 4, 13, 17, 11, 275, 663, 748, 239, 74.47916666666666, 55.04981884057971, 55.25),
    ('os', 4, 4, 2, 30, 3, 35, 60, 90, 14, 37.5, 31.25, 32.142857142857146),
    ('os', 4, 4, 8, 1, 9, 41, 24, 18, 120, 75.0, 10.714285714285714, 10.975609756097562),
    ('os', 4, 4, 1, 20, 1, 25, 20, 20, 9, 6.25, 4.807692307692308, 5.0),
    ('os', 4, 4, 31, 5, 8, 175, 310, 320, 376, 96.875, 44.03409090909089, 44.285714285714285),
    ('os', 8, 4, 4, 4, 4, 13, 16, 16, 28, 50.0, 14.285714285714285, 15.384615384615385),
    ('os', 8, 4, 5, 7, 3, 16, 35, 21, 27, 46.875, 19.301470588235293, 20.5078125),
    ('os', 8, 4, 9, 2, 6, 47, 36, 24, 102, 42.1875, 7.03125, 7.180851063829787),
    ('os', 8, 4, 1, 1, 1, 10, 1, 1, 13, 3.125, 0.2840909090909091, 0.3125),
    ('os', 8, 4, 16, 12, 10, 131, 576, 240, 232, 83.33333333333334, 45.45454545454544, 45.80152671755725),
    ('os', 8, 4, 13, 17, 11, 161, 663, 374, 215, 74.47916666666666, 46.89429012345679, 47.18555900621118),
    ('os', 8, 4, 2, 30, 3, 39, 60, 90, 18, 18.75, 14.0625, 14.423076923076923),
    ('os', 8, 4, 8, 1, 9, 32, 24, 9, 108, 75.0, 6.818181818181819, 7.03125),
    ('os', 8, 4, 1, 20, 1, 29, 20, 20, 13, 3.125, 2.083333333333333, 2.1551724137931036),
    ('os', 8, 4, 31, 5, 8, 119, 310, 160, 344, 96.875, 32.291666666666664, 32.563025210084035),
    ('os', 4, 8, 4, 4, 4, 13, 16, 16, 28, 50.0, 14.285714285714285, 15.384615384615385),
    ('os', 4, 8, 5, 7, 3, 33, 35, 42, 39, 23.4375, 9.650735294117647, 9.943181818181818),
    ('os', 4, 8, 9, 2, 6, 35, 18, 36, 90, 56.25, 9.375, 9.642857142857142),
    ('os', 4, 8, 1, 1, 1, 10, 1, 1, 13, 3.125, 0.2840909090909091, 0.3125),
    ('os', 4, 8, 16, 12, 10, 175, 384, 480, 256, 62.5, 34.09090909090908, 34.285714285714285),
    ('os', 4, 8, 13, 17, 11, 215, 442, 748, 239, 55.859375, 35.170717592592595, 35.3343023255814),
    ('os', 4, 8, 2, 30, 3, 39, 60, 90, 18, 18.75, 14.0625, 14.423076923076923),
    ('os', 4, 8, 8, 1, 9, 43, 16, 18, 120, 56.25, 5.113636363636363, 5.232558139534884),
    ('os', 4, 8, 1, 20, 1, 29, 20, 20, 13, 3.125, 2.083333333333333, 2.1551724137931036),
    ('os', 4, 8, 31, 5, 8, 119, 155, 320, 344, 96.875, 32.291666666666664, 32.563025210084035),
    ('os', 3, 5, 4, 4, 4, 19, 16, 32, 32, 53.333333333333336, 21.333333333333336, 22.45614035087719),
    ('os', 3, 5, 5, 7, 3, 25, 35, 42, 31, 50.0, 26.923076923076927, 28.0),
    ('os', 3, 5, 9, 2, 6, 47, 36, 36, 102, 60.00000000000001, 15.000000000000002, 15.319148936170214),
    ('os', 3, 5, 1, 1, 1, 6, 1, 1, 9, 6.666666666666667, 0.9523809523809524, 1.1111111111111112),
    ('os', 3, 5, 16, 12, 10, 215, 384, 720, 256, 88.88888888888889, 59.25925925925927, 59.53488372093023),
    ('os', 3, 5, 13, 17, 11, 344, 663, 935, 263, 63.55555555555553, 46.975845410628004, 47.1124031007752),
    ('os', 3, 5, 2, 30, 3, 35, 60, 90, 14, 40.0, 33.33333333333333, 34.285714285714285),
    ('os', 3, 5, 8, 1, 9, 41, 16, 27, 120, 80.0, 11.428571428571429, 11.707317073170731),
    ('os', 3, 5, 1, 20, 1, 25, 20, 20, 9, 6.666666666666667, 5.128205128205128, 5.333333333333333),
    ('os', 3, 5, 31, 5, 8, 241, 310, 440, 424, 75.15151515151514, 34.15977961432505, 34.3015214384509),
    ('os', 8, 8, 4, 4, 4, 17, 16, 16, 32, 25.0, 5.555555555555555, 5.882352941176471),
    ('os', 8, 8, 5, 7, 3, 20, 35, 21, 31, 23.4375, 7.8125, 8.203125),
    ('os', 8, 8, 9, 2, 6, 31, 18, 24, 86, 42.1875, 5.2734375, 5.443548387096774),
    ('os', 8, 8, 1, 1, 1, 14, 1, 1, 17, 1.5625, 0.10416666666666667, 0.11160714285714286),
    ('os', 8, 8, 16, 12, 10, 103, 384, 240, 224, 62.5, 28.84615384615385, 29.12621359223301),
    ('os', 8, 8, 13, 17, 11, 123, 442, 374, 207, 55.859375, 30.632560483870964, 30.88160569105691),
    ('os', 8, 8, 2, 30, 3, 43, 60, 90, 22, 9.375, 6.392045454545454, 6.540697674418604),
    ('os', 8, 8, 8, 1, 9, 29, 16, 9, 104, 56.25, 3.75, 3.8793103448275863),
    ('os', 8, 8, 1, 20, 1, 33, 20, 20, 17, 1.5625, 0.9191176470588236, 0.946969696969697),
    ('os', 8, 8, 31, 5, 8, 75, 155, 160, 312, 96.875, 25.493421052631582, 25.833333333333332),
    ('os', 1, 1, 4, 4, 4, 63, 64, 64, 48, 100.0, 100.0, 101.58730158730158),
    ('os', 1, 1, 5, 7, 3, 104, 105, 105, 45, 100.0, 100.0, 100.96153846153847),
    ('os', 1, 1, 9, 2, 6, 107, 108, 108, 162, 100.0, 100.0, 100.93457943925233),
    ('os', 1, 1, 16, 12, 10, 1919, 1920, 1920, 480, 100.0, 100.0, 100.05211047420532),
    ('os', 1, 1, 13, 17, 11, 2430, 2431, 2431, 429, 100.0, 100.0, 100.04115226337449),
    ('os', 1, 1, 2, 30, 3, 179, 180, 180, 18, 100.0, 100.0, 100.55865921787709),
    ('os', 1, 1, 8, 1, 9, 71, 72, 72, 216, 100.0, 100.0, 101.40845070422536),
    ('os', 1, 1, 1, 20, 1, 19, 20, 20, 3, 100.0, 100.0, 105.26315789473684),
    ('os', 1, 1, 31, 5, 8, 1239, 1240, 1240, 744, 100.0, 100.0, 100.08071025020178),
    ('os', 2, 7, 4, 4, 4, 21, 16, 32, 34, 57.14285714285714, 20.77922077922078, 21.768707482993197),
    ('os', 2, 7, 5, 7, 3, 41, 35, 63, 42, 35.714285714285715, 17.857142857142858, 18.29268292682927),
    ('os', 2, 7, 9, 2, 6, 44, 18, 60, 99, 77.14285714285714, 17.142857142857142, 17.532467532467532),
    ('os', 2, 7, 1, 1, 1, 7, 1, 1, 10, 7.142857142857142, 0.8928571428571428, 1.0204081632653061),
    ('os', 2, 7, 16, 12, 10, 303, 384, 960, 304, 71.42857142857144, 45.11278195488723, 45.26166902404526),
    ('os', 2, 7, 13, 17, 11, 335, 442, 1309, 269, 72.95918367346938, 51.6794217687075, 51.833688699360344),
    ('os', 2, 7, 2, 30, 3, 36, 60, 90, 15, 42.857142857142854, 34.74903474903475, 35.714285714285715),
    ('os', 2, 7, 8, 1, 9, 63, 16, 36, 144, 64.28571428571428, 8.035714285714285, 8.16326530612245),
    ('os', 2, 7, 1, 20, 1, 26, 20, 20, 10, 7.142857142857142, 5.291005291005291, 5.4945054945054945),
    ('os', 2, 7, 31, 5, 8, 383, 310, 640, 536, 55.35714285714284, 23.065476190476183, 23.125699365908243),
    ('ws', 4, 4, 4, 4, 4, 13, 16, 16, 16, 100.0, 23.52941176470588, 30.76923076923077),
    ('ws', 4, 4, 5, 7, 3, 29, 35, 21, 30, 65.625, 18.229166666666668, 22.629310344827587),
    ('ws', 4, 4, 9, 2, 6, 37, 36, 12, 54, 37.5, 15.340909090909092, 18.243243243243242),
    ('ws', 4, 4, 1, 1, 1, 10, 1, 1, 1, 6.25, 0.4464285714285714, 0.625),
    ('ws', 4, 4, 16, 12, 10, 233, 576, 120, 480, 83.33333333333334, 45.97701149425288, 51.502145922746784),
    ('ws', 4, 4, 13, 17, 11, 344, 663, 187, 715, 77.91666666666667, 38.958333333333336, 44.16787790697674),
    ('ws', 4, 4, 2, 30, 3, 95, 60, 90, 48, 70.3125, 9.375, 11.842105263157896),
    ('ws', 4, 4, 8, 1, 9, 53, 24, 9, 72, 18.75, 7.142857142857142, 8.49056603773585),
    ('ws', 4, 4, 1, 20, 1, 54, 20, 20, 5, 25.0, 1.7857142857142856, 2.314814814814815),
    ('ws', 4, 4, 31, 5, 8, 163, 310, 40, 496, 62.5, 44.03409090909092, 47.54601226993865),
    ('ws', 8, 4, 4, 4, 4, 21, 16, 16, 16, 50.0, 8.0, 9.523809523809524),
    ('ws', 8, 4, 5, 7, 3, 22, 35, 21, 15, 65.625, 12.620192307692307, 14.914772727272727),
    ('ws', 8, 4, 9, 2, 6, 53, 36, 12, 54, 18.75, 5.624999999999999, 6.367924528301887),
    ('ws', 8, 4, 1, 1, 1, 18, 1, 1, 1, 3.125, 0.14204545454545456, 0.1736111111111111),
    ('ws', 8, 4, 16, 12, 10, 203, 576, 120, 320, 62.5, 27.027027027027028, 29.55665024630542),
    ('ws', 8, 4, 13, 17, 11, 278, 663, 187, 429, 64.93055555555556, 24.826388888888886, 27.326888489208635),
    ('ws', 8, 4, 2, 30, 3, 79, 60, 90, 24, 70.3125, 6.114130434782608, 7.120253164556962),
    ('ws', 8, 4, 8, 1, 9, 77, 24, 9, 72, 9.375, 2.586206896551724, 2.9220779220779223),
    ('ws', 8, 4, 1, 20, 1, 56, 20, 20, 3, 20.833333333333336, 0.946969696969697, 1.1160714285714286),
    ('ws', 8, 4, 31, 5, 8, 97, 310, 40, 248, 62.5, 37.25961538461539, 39.94845360824742),
    ('ws', 4, 8, 4, 4, 4, 17, 16, 16, 16, 50.0, 8.0, 11.764705882352942),
    ('ws', 4, 8, 5, 7, 3, 37, 35, 21, 30, 32.8125, 6.310096153846153, 8.868243243243244),
    ('ws', 4, 8, 9, 2, 6, 22, 18, 12, 54, 37.5, 11.25, 15.340909090909092),
    ('ws', 4, 8, 1, 1, 1, 14, 1, 1, 1, 3.125, 0.14204545454545456, 0.22321428571428573),
    ('ws', 4, 8, 16, 12, 10, 179, 384, 120, 480, 62.5, 27.027027027027028, 33.5195530726257),
    ('ws', 4, 8, 13, 17, 11, 269, 442, 187, 715, 58.4375, 22.34375, 28.241171003717472),
    ('ws', 4, 8, 2, 30, 3, 127, 60, 90, 48, 35.15625, 3.057065217391304, 4.429133858267717),
    ('ws', 4, 8, 8, 1, 9, 43, 16, 9, 72, 14.0625, 3.8793103448275863, 5.232558139534884),
    ('ws', 4, 8, 1, 20, 1, 74, 20, 20, 5, 12.5, 0.5681818181818182, 0.8445945945945946),
    ('ws', 4, 8, 31, 5, 8, 89, 155, 40, 496, 62.5, 37.25961538461539, 43.53932584269663),
    ('ws', 3, 5, 4, 4, 4, 25, 16, 16, 32, 53.333333333333336, 12.549019607843137, 17.066666666666666),
    ('ws', 3, 5, 5, 7, 3, 41, 35, 21, 45, 46.666666666666664, 12.962962962962962, 17.073170731707318),
    ('ws', 3, 5, 9, 2, 6, 35, 36, 12, 54, 40.0, 16.363636363636363, 20.571428571428573),
    ('ws', 3, 5, 1, 1, 1, 9, 1, 1, 1, 6.666666666666667, 0.4761904761904762, 0.7407407407407407),
    ('ws', 3, 5, 16, 12, 10, 199, 384, 120, 640, 100.0, 55.17241379310346, 64.321608040201),
    ('ws', 3, 5, 13, 17, 11, 395, 663, 187, 858, 69.25925925925924, 34.62962962962962, 41.029535864978904),
    ('ws', 3, 5, 2, 30, 3, 109, 60, 90, 60, 59.999999999999986, 7.999999999999999, 11.009174311926605),
    ('ws', 3, 5, 8, 1, 9, 33, 16, 9, 72, 30.0, 11.428571428571429, 14.545454545454545),
    ('ws', 3, 5, 1, 20, 1, 69, 20, 20, 7, 19.047619047619047, 1.3605442176870748, 1.932367149758454),
    ('ws', 3, 5, 31, 5, 8, 159, 310, 40, 496, 66.66666666666666, 46.96969696969697, 51.9916142557652),
    ('ws', 8, 8, 4, 4, 4, 25, 16, 16, 16, 25.0, 3.0303030303030303, 4.0),
    ('ws', 8, 8, 5, 7, 3, 26, 35, 21, 15, 32.8125, 4.825367647058823, 6.310096153846154),
    ('ws', 8, 8, 9, 2, 6, 30, 18, 12, 54, 18.75, 4.440789473684211, 5.625),
    ('ws', 8, 8, 1, 1, 1, 22, 1, 1, 1, 1.5625, 0.052083333333333336, 0.07102272727272728),
    ('ws', 8, 8, 16, 12, 10, 151, 384, 120, 320, 46.875, 16.666666666666664, 19.867549668874172),
    ('ws', 8, 8, 13, 17, 11, 209, 442, 187, 429, 48.69791666666667, 15.073164682539684, 18.174342105263158),
    ('ws', 8, 8, 2, 30, 3, 95, 60, 90, 24, 35.15625, 2.2681451612903225, 2.960526315789474),
    ('ws', 8, 8, 8, 1, 9, 59, 16, 9, 72, 7.03125, 1.5202702702702704, 1.9067796610169492),
    ('ws', 8, 8, 1, 20, 1, 68, 20, 20, 3, 10.416666666666668, 0.3472222222222222, 0.45955882352941174),
    ('ws', 8, 8, 31, 5, 8, 52, 155, 40, 248, 62.5, 32.29166666666667, 37.25961538461539),
    ('ws', 1, 1, 4, 4, 4, 79, 64, 16, 64, 100.0, 80.00000000000001, 81.0126582278481),
    ('ws', 1, 1, 5, 7, 3, 125, 105, 21, 105, 100.0, 83.33333333333334, 84.0),
    ('ws', 1, 1, 9, 2, 6, 119, 108, 12, 108, 100.0, 90.00000000000003, 90.75630252100841),
    ('ws', 1, 1, 1, 1, 1, 1, 1, 1, 1, 100.0, 50.0, 100.0),
    ('ws', 1, 1, 16, 12, 10, 2039, 1920, 120, 1920, 100.0, 94.1176470588233, 94.16380578715057),
    ('ws', 1, 1, 13, 17, 11, 2617, 2431, 187, 2431, 100.0, 92.85714285714263, 92.89262514329384),
    ('ws', 1, 1, 2, 30, 3, 269, 180, 90, 180, 100.0, 66.66666666666659, 66.91449814126393),
    ('ws', 1, 1, 8, 1, 9, 80, 72, 9, 72, 100.0, 88.8888888888889, 90.0),
    ('ws', 1, 1, 1, 20, 1, 39, 20, 20, 20, 100.0, 50.0, 51.282051282051285),
    ('ws', 1, 1, 31, 5, 8, 1279, 1240, 40, 1240, 100.0, 96.875, 96.95074276778733),
    ('ws', 2, 7, 4, 4, 4, 25, 16, 16, 32, 57.14285714285714, 12.030075187969924, 18.285714285714285),
    ('ws', 2, 7, 5, 7, 3, 55, 35, 21, 60, 37.49999999999999, 9.374999999999998, 13.636363636363637),
    ('ws', 2, 7, 9, 2, 6, 17, 18, 12, 54, 85.71428571428571, 32.142857142857146, 45.378151260504204),
    ('ws', 2, 7, 1, 1, 1, 9, 1, 1, 1, 7.142857142857142, 0.4464285714285714, 0.7936507936507936),
    ('ws', 2, 7, 16, 12, 10, 299, 384, 120, 960, 71.42857142857144, 36.866359447004605, 45.867176301958914),
    ('ws', 2, 7, 13, 17, 11, 395, 442, 187, 1287, 74.2063492063492, 34.45294784580499, 43.96021699819168),
    ('ws', 2, 7, 2, 30, 3, 164, 60, 90, 90, 42.85714285714286, 5.042016806722691, 7.839721254355401),
    ('ws', 2, 7, 8, 1, 9, 33, 16, 9, 72, 32.14285714285714, 11.180124223602483, 15.584415584415584),
    ('ws', 2, 7, 1, 20, 1, 99, 20, 20, 10, 14.285714285714283, 0.8928571428571427, 1.443001443001443),
    ('ws', 2, 7, 31, 5, 8, 239, 310, 40, 744, 47.61904761904762, 32.09109730848861, 37.05917513448894),
    ('is', 4, 4, 4, 4, 4, 13, 16, 16, 16, 100.0, 23.52941176470588, 30.76923076923077),
    ('is', 4, 4, 5, 7, 3, 51, 35, 42, 30, 54.6875, 10.25390625, 12.867647058823529),
    ('is', 4, 4, 9, 2, 6, 47, 18, 36, 54, 37.5, 11.842105263157894, 14.361702127659575),
    ('is', 4, 4, 1, 1, 1, 10, 1, 1, 1, 6.25, 0.4464285714285714, 0.625),
    ('is', 4, 4, 16, 12, 10, 239, 192, 480, 480, 100.0, 43.478260869565226, 50.2092050209205),
    ('is', 4, 4, 13, 17, 11, 419, 221, 748, 715, 69.0625, 31.65364583333332, 36.261933174224346),
    ('is', 4, 4, 2, 30, 3, 103, 60, 90, 48, 46.875, 8.7890625, 10.922330097087379),
    ('is', 4, 4, 8, 1, 9, 37, 8, 18, 72, 25.0, 10.227272727272728, 12.162162162162161),
    ('is', 4, 4, 1, 20, 1, 54, 20, 20, 5, 25.0, 1.7857142857142856, 2.314814814814815),
    ('is', 4, 4, 31, 5, 8, 287, 155, 320, 496, 60.546875, 23.065476190476193, 27.00348432055749),
    ('is', 8, 4, 4, 4, 4, 21, 16, 16, 16, 50.0, 8.0, 9.523809523809524),
    ('is', 8, 4, 5, 7, 3, 41, 35, 42, 15, 54.6875, 6.8359375, 8.003048780487806),
    ('is', 8, 4, 9, 2, 6, 71, 18, 36, 54, 18.75, 4.166666666666666, 4.753521126760563),
    ('is', 8, 4, 1, 1, 1, 18, 1, 1, 1, 3.125, 0.14204545454545456, 0.1736111111111111),
    ('is', 8, 4, 16, 12, 10, 223, 192, 480, 320, 75.0, 24.193548387096776, 26.905829596412556),
    ('is', 8, 4, 13, 17, 11, 347, 221, 748, 429, 57.552083333333336, 19.783528645833336, 21.89301152737752),
    ('is', 8, 4, 2, 30, 3, 83, 60, 90, 24, 46.875, 5.859375, 6.77710843373494),
    ('is', 8, 4, 8, 1, 9, 53, 8, 18, 72, 12.5, 3.75, 4.245283018867925),
    ('is', 8, 4, 1, 20, 1, 56, 20, 20, 3, 20.833333333333336, 0.946969696969697, 1.1160714285714286),
    ('is', 8, 4, 31, 5, 8, 207, 155, 320, 248, 60.546875, 16.70258620689655, 18.719806763285025),
    ('is', 4, 8, 4, 4, 4, 17, 16, 16, 16, 50.0, 8.0, 11.764705882352942),
    ('is', 4, 8, 5, 7, 3, 33, 35, 21, 30, 54.6875, 6.8359375, 9.943181818181818),
    ('is', 4, 8, 9, 2, 6, 39, 18, 24, 54, 28.125, 6.25, 8.653846153846153),
    ('is', 4, 8, 1, 1, 1, 14, 1, 1, 1, 3.125, 0.14204545454545456, 0.22321428571428573),
    ('is', 4, 8, 16, 12, 10, 143, 192, 240, 480, 100.0, 32.25806451612903, 41.95804195804196),
    ('is', 4, 8, 13, 17, 11, 249, 221, 374, 715, 69.0625, 23.740234375, 30.509538152610443),
    ('is', 4, 8, 2, 30, 3, 135, 60, 90, 48, 23.4375, 2.9296875, 4.166666666666667),
    ('is', 4, 8, 8, 1, 9, 22, 8, 9, 72, 25.0, 7.5, 10.227272727272727),
    ('is', 4, 8, 1, 20, 1, 74, 20, 20, 5, 12.5, 0.5681818181818182, 0.8445945945945946),
    ('is', 4, 8, 31, 5, 8, 175, 155, 160, 496, 60.546875, 16.70258620689655, 22.142857142857142),
    ('is', 3, 5, 4, 4, 4, 25, 16, 16, 32, 53.333333333333336, 12.549019607843137, 17.066666666666666),
    ('is', 3, 5, 5, 7, 3, 35, 35, 21, 45, 77.77777777777779, 14.583333333333334, 20.0),
    ('is', 3, 5, 9, 2, 6, 29, 18, 24, 54, 60.0, 18.94736842105263, 24.82758620689655),
    ('is', 3, 5, 1, 1, 1, 9, 1, 1, 1, 6.666666666666667, 0.4761904761904762, 0.7407407407407407),
    ('is', 3, 5, 16, 12, 10, 303, 192, 480, 640, 79.99999999999999, 34.782608695652186, 42.244224422442244),
    ('is', 3, 5, 13, 17, 11, 359, 221, 561, 858, 81.85185185185185, 37.515432098765444, 45.143918291550605),
    ('is', 3, 5, 2, 30, 3, 119, 60, 90, 60, 40.0, 7.499999999999998, 10.084033613445378),
    ('is', 3, 5, 8, 1, 9, 35, 8, 18, 72, 26.666666666666668, 10.909090909090908, 13.714285714285714),
    ('is', 3, 5, 1, 20, 1, 69, 20, 20, 7, 19.047619047619047, 1.3605442176870748, 1.932367149758454),
    ('is', 3, 5, 31, 5, 8, 237, 155, 280, 496, 73.8095238095238, 28.11791383219954, 34.88045007032349),
    ('is', 8, 8, 4, 4, 4, 25, 16, 16, 16, 25.0, 3.0303030303030303, 4.0),
    ('is', 8, 8, 5, 7, 3, 24, 35, 21, 15, 54.6875, 5.126953125, 6.8359375),
    ('is', 8, 8, 9, 2, 6, 55, 18, 24, 54, 14.0625, 2.410714285714286, 3.0681818181818183),
    ('is', 8, 8, 1, 1, 1, 22, 1, 1, 1, 1.5625, 0.052083333333333336, 0.07102272727272728),
    ('is', 8, 8, 16, 12, 10, 127, 192, 240, 320, 75.0, 19.23076923076923, 23.62204724409449),
    ('is', 8, 8, 13, 17, 11, 197, 221, 374, 429, 57.552083333333336, 15.82682291666667, 19.281408629441625),
    ('is', 8, 8, 2, 30, 3, 99, 60, 90, 24, 23.4375, 2.197265625, 2.840909090909091),
    ('is', 8, 8, 8, 1, 9, 30, 8, 9, 72, 12.5, 2.9605263157894735, 3.75),
    ('is', 8, 8, 1, 20, 1, 68, 20, 20, 3, 10.416666666666668, 0.3472222222222222, 0.45955882352941174),
    ('is', 8, 8, 31, 5, 8, 119, 155, 160, 248, 60.546875, 13.091216216216218, 16.281512605042018),
    ('is', 1, 1, 4, 4, 4, 79, 16, 64, 64, 100.0, 80.00000000000001, 81.0126582278481),
    ('is', 1, 1, 5, 7, 3, 139, 35, 105, 105, 100.0, 75.0, 75.53956834532374),
    ('is', 1, 1, 9, 2, 6, 125, 18, 108, 108, 100.0, 85.71428571428572, 86.4),
    ('is', 1, 1, 1, 1, 1, 1, 1, 1, 1, 100.0, 50.0, 100.0),
    ('is', 1, 1, 16, 12, 10, 2111, 192, 1920, 1920, 100.0, 90.90909090909071, 90.95215537659877),
    ('is', 1, 1, 13, 17, 11, 2651, 221, 2431, 2431, 100.0, 91.66666666666644, 91.70124481327801),
    ('is', 1, 1, 2, 30, 3, 239, 60, 180, 180, 100.0, 75.0, 75.31380753138075),
    ('is', 1, 1, 8, 1, 9, 79, 8, 72, 72, 100.0, 90.00000000000001, 91.13924050632912),
    ('is', 1, 1, 1, 20, 1, 39, 20, 20, 20, 100.0, 50.0, 51.282051282051285),
    ('is', 1, 1, 31, 5, 8, 1394, 155, 1240, 1240, 100.0, 88.88888888888866, 88.95265423242468),
    ('is', 2, 7, 4, 4, 4, 25, 16, 16, 32, 57.14285714285714, 12.030075187969924, 18.285714285714285),
    ('is', 2, 7, 5, 7, 3, 47, 35, 21, 60, 62.5, 10.416666666666666, 15.957446808510639),
    ('is', 2, 7, 9, 2, 6, 29, 18, 24, 54, 64.28571428571428, 18.36734693877551, 26.600985221674875),
    ('is', 2, 7, 1, 1, 1, 9, 1, 1, 1, 7.142857142857142, 0.4464285714285714, 0.7936507936507936),
    ('is', 2, 7, 16, 12, 10, 341, 192, 360, 960, 76.19047619047622, 30.476190476190464, 40.217846669459576),
    ('is', 2, 7, 13, 17, 11, 359, 221, 374, 1287, 87.69841269841272, 37.10317460317459, 48.36848388380422),
    ('is', 2, 7, 2, 30, 3, 179, 60, 90, 90, 28.571428571428566, 4.761904761904763, 7.182761372705507),
    ('is', 2, 7, 8, 1, 9, 35, 8, 18, 72, 28.57142857142857, 10.714285714285714, 14.693877551020408),
    ('is', 2, 7, 1, 20, 1, 99, 20, 20, 10, 14.285714285714283, 0.8928571428571427, 1.443001443001443),
    ('is', 2, 7, 31, 5, 8, 254, 155, 200, 744, 73.8095238095238, 25.672877846790886, 34.87064116985377),
    ('os', 32, 32, 100, 70, 90, 1583, 21000, 25200, 9768, 73.2421875, 38.84055397727273, 38.865090018951356),
    ('os', 32, 32, 64, 64, 64, 503, 8192, 8192, 4352, 100.0, 50.79365079365079, 50.89463220675945),
    ('os', 32, 32, 7, 200, 33, 523, 2800, 6600, 359, 11.279296875, 8.610150286259541, 8.626613288718929),
    ('os', 16, 64, 100, 70, 90, 2071, 14000, 44100, 10120, 62.77901785714286, 29.692778716216218, 29.70711612747465),
    ('os', 16, 64, 64, 64, 64, 567, 4096, 16384, 4416, 100.0, 45.07042253521127, 45.14991181657848),
    ('os', 16, 64, 7, 200, 33, 277, 1400, 6600, 311, 22.55859375, 16.229204136690647, 16.287793321299638),
    ('ws', 32, 32, 100, 70, 90, 1745, 21000, 6300, 27000, 68.359375, 30.381944444444443, 35.25698424068768),
    ('ws', 32, 32, 64, 64, 64, 631, 8192, 4096, 8192, 100.0, 33.86243386243386, 40.57052297939778),
    ('ws', 32, 32, 7, 200, 33, 1413, 2800, 6600, 1617, 46.03794642857143, 2.4414062499999996, 3.193006900212314),
    ('ws', 16, 64, 100, 70, 90, 1939, 14000, 6300, 45000, 61.5234375, 23.93908073929961, 31.72946750902527),
    ('ws', 16, 64, 64, 64, 64, 631, 4096, 4096, 16384, 100.0, 28.95927601809955, 40.57052297939778),
    ('ws', 16, 64, 7, 200, 33, 1312, 1400, 6600, 3003, 49.57932692307692, 2.1161907833020637, 3.438810022865854),
    ('is', 32, 32, 100, 70, 90, 2207, 7000, 25200, 27000, 56.966145833333336, 23.846293604651162, 27.87650090620752),
    ('is', 32, 32, 64, 64, 64, 631, 4096, 8192, 8192, 100.0, 33.86243386243386, 40.57052297939778),
    ('is', 32, 32, 7, 200, 33, 888, 1400, 6600, 1617, 19.53125, 4.07931170886076, 5.080764358108108),
    ('is', 16, 64, 100, 70, 90, 1839, 7000, 12600, 45000, 68.359375, 24.90827429149798, 33.454832789559546),
    ('is', 16, 64, 64, 64, 64, 631, 4096, 4096, 16384, 100.0, 28.95927601809955, 40.57052297939778),
    ('is', 16, 64, 7, 200, 33, 1650, 1400, 6600, 3003, 10.516826923076923, 1.8266067813765188, 2.734375),
]

SYSTOLIC = ("os", "ws", "is")


# --------------------------------------------------------------------------- SCALE-Sim 3.0.0


@pytest.mark.parametrize("df", SYSTOLIC)
def test_matches_scalesim_3_0_0_runs(df):
    rows = [r for r in SCALESIM_3_0_0_GEMM if r[0] == df]
    assert len(rows) >= 70
    for (_, R, C, M, K, N, total, ifmap, filt, ofmap, map_eff, comp_util, overall) in rows:
        r = get_dataflow(df).fold_report(M, K, N, R, C)
        where = f"{df} M={M} K={K} N={N} on {R}x{C}"
        assert r.scalesim_cycles == total, where
        assert r.compute_cycles == total + 1, where
        assert r.scalesim_sram_reads_input == ifmap, where
        assert r.scalesim_sram_reads_weight == filt, where
        assert r.scalesim_sram_writes_output == ofmap, where
        assert r.mapping_efficiency * 100 == pytest.approx(map_eff, rel=1e-12), where
        assert r.scalesim_compute_utilization * 100 == pytest.approx(comp_util, rel=1e-12), where
        assert r.scalesim_overall_utilization * 100 == pytest.approx(overall, rel=1e-12), where


def test_os_4x4x4_on_4x4_is_scalesims_9():
    # SCALE-Sim issue #125: the ISPASS'20 figure implies 10; the code reports 9
    r = get_dataflow("os").fold_report(4, 4, 4, 4, 4)
    assert (r.folds, r.cycles_per_fold, r.compute_cycles, r.scalesim_cycles) == (1, 10, 10, 9)
    # and SCALE-Sim's OS ofmap writes add (R + C) per fold: 16 + 8
    assert r.sram_writes_output == 16 and r.scalesim_sram_writes_output == 24


def test_our_counts_equal_scalesims_except_os_ofmap_writes():
    for (df, R, C, M, K, N, *_rest) in SCALESIM_3_0_0_GEMM:
        r = get_dataflow(df).fold_report(M, K, N, R, C)
        assert r.sram_reads_input == r.scalesim_sram_reads_input
        assert r.sram_reads_weight == r.scalesim_sram_reads_weight
        extra = r.folds * (R + C) if df == "os" else 0
        assert r.scalesim_sram_writes_output - r.sram_writes_output == extra


def test_overall_utilization_undefined_where_scalesim_divides_by_zero():
    r = get_dataflow("os").fold_report(1, 1, 1, 1, 1)
    assert r.compute_cycles == 1 and r.scalesim_cycles == 0
    assert math.isnan(r.scalesim_overall_utilization)
    assert r.utilization == 1.0


# --------------------------------------------------------------------------- fold by fold


def _scalesim_fold_loop(df: str, M: int, K: int, N: int, R: int, C: int) -> dict:
    """SCALE-Sim's compute loops, one fold at a time (no closed forms)."""
    Sr, Sc, T = {"os": (M, N, K), "ws": (K, N, M), "is": (K, M, N)}[df]
    cycles = 0
    ifmap = filt = ofmap = 0
    effs = []
    for fc in range(math.ceil(Sc / C)):
        for fr in range(math.ceil(Sr / R)):
            ur = min(R, Sr - fr * R)
            uc = min(C, Sc - fc * C)
            cycles += (R + C + T - 2) if df == "os" else (2 * R + C + T - 2)
            effs.append(ur * uc / (R * C))
            if df == "os":
                ifmap += T * ur
                filt += T * uc
                ofmap += ur * uc + R + C
            elif df == "ws":
                ifmap += T * ur
                filt += ur * uc
                ofmap += T * uc
            else:
                ifmap += ur * uc
                filt += T * ur
                ofmap += T * uc
    return dict(total=cycles - 1, ifmap=ifmap, filt=filt, ofmap=ofmap, eff=sum(effs) / len(effs), folds=len(effs))


@pytest.mark.parametrize("df", SYSTOLIC)
def test_closed_form_equals_scalesim_fold_loop_on_grid(df):
    model = get_dataflow(df)
    for R in (1, 2, 3, 4, 8, 16):
        for C in (1, 3, 4, 8, 32):
            for M in (1, 2, 5, 16, 33):
                for K in (1, 3, 8, 17):
                    for N in (1, 4, 9, 40):
                        want = _scalesim_fold_loop(df, M, K, N, R, C)
                        r = model.fold_report(M, K, N, R, C)
                        got = dict(total=r.scalesim_cycles, ifmap=r.scalesim_sram_reads_input,
                                   filt=r.scalesim_sram_reads_weight, ofmap=r.scalesim_sram_writes_output,
                                   eff=pytest.approx(r.mapping_efficiency, rel=1e-12), folds=r.folds)
                        assert want == got, (df, M, K, N, R, C)


# --------------------------------------------------------------------------- hand-computed


def test_hand_computed_ws_and_is():
    # WS, m=5 tokens, k=6, n=3 on a 4x2 array: row folds 2 (4 + 2), col folds 2 (2 + 1)
    r = get_dataflow("ws").fold_report(5, 6, 3, 4, 2)
    assert (r.Sr, r.Sc, r.T) == (6, 3, 5)
    assert (r.row_folds, r.col_folds, r.folds) == (2, 2, 4)
    assert r.cycles_per_fold == 2 * 4 + 2 + 5 - 2 == 13
    assert r.compute_cycles == 52
    assert r.sram_reads_weight == 18                     # every weight once
    assert r.sram_reads_input == 2 * 5 * 6               # A once per column fold
    assert r.sram_writes_output == 2 * 5 * 3             # a partial per row fold
    assert r.sram_reads_psum == 1 * 5 * 3                # read back in the second row fold
    assert r.rf_writes_weight == 3 * (10 + 3)            # rows 0..3 of fold 1: 1+2+3+4; fold 2: 1+2
    assert r.hops_weight == 3 * (6 + 1)
    assert r.hops_input == 5 * 6 * (3 - 2)               # only the 2-wide column fold forwards
    assert r.hops_psum == 5 * 3 * (6 - 2)
    assert r.rf_reads_psum == r.rf_writes_psum == r.macs - 30
    assert r.mapping_efficiency == pytest.approx((4 * 2 + 4 * 1 + 2 * 2 + 2 * 1) / (4 * 8))
    # IS is WS on the transposed product: stationary A (k x m), stream B
    s = get_dataflow("is").fold_report(3, 6, 5, 4, 2)
    assert (s.Sr, s.Sc, s.T, s.compute_cycles) == (6, 3, 5, 52)
    assert s.sram_reads_input == 18 and s.sram_reads_weight == 2 * 5 * 6


def test_hand_computed_rs():
    # m=3, k=8, n=2 on 2x2, L=2: each array row covers 2 k, a fold covers 4 k -> 2 row folds
    r = get_dataflow("rs", row_length=2).fold_report(3, 8, 2, 2, 2)
    assert (r.row_folds, r.col_folds, r.folds) == (2, 1, 2)
    assert r.cycles_per_fold == 2 * 2 + 2 * 3 + 1 + 1 == 12
    assert r.compute_cycles == 24
    assert r.sram_writes_output == 12 and r.sram_reads_psum == 6
    assert r.rf_writes_weight == 2 * 2 * (2 * 1 + 2 * 2)   # 2 cols, 2 folds, PE0: 1 each, PE1: 2 each
    assert r.mapping_efficiency == 1.0
    # k = 7: the second fold holds 3 k: PE0 full (2 slots), PE1 one slot (right-aligned)
    s = get_dataflow("rs", row_length=2).fold_report(3, 7, 2, 2, 2)
    assert s.rf_writes_weight == 2 * ((2 + 4) + (2 + 2))
    assert s.mapping_efficiency == pytest.approx(7 * 2 / (2 * 2 * 2 * 2))


def test_rs_with_row_length_1_is_ws():
    ws, rs = get_dataflow("ws"), get_dataflow("rs", row_length=1)
    rng = np.random.default_rng(3)
    m, k, n = (rng.integers(1, 300, 500) for _ in range(3))
    R, C = rng.integers(1, 64, 500), rng.integers(1, 64, 500)
    a, b = ws.fold_report(m, k, n, R, C), rs.fold_report(m, k, n, R, C)
    for f in FoldReport.__dataclass_fields__:
        if f in ("dataflow", "scalesim_compute_utilization"):   # the latter: SCALE-Sim's WS quirk
            continue
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    np.testing.assert_array_equal(b.scalesim_compute_utilization, b.utilization)


def test_rs_row_length_trade_off():
    """Longer rows: fewer reduction folds, psum round trips and fill/drain overheads."""
    m, k, n, R, C = 16, 64, 8, 4, 4
    reps = [get_dataflow("rs", row_length=L).fold_report(m, k, n, R, C) for L in (1, 2, 4, 8, 16)]
    assert [r.row_folds for r in reps] == [16, 8, 4, 2, 1]
    assert [r.sram_reads_psum for r in reps] == [15 * 128, 7 * 128, 3 * 128, 1 * 128, 0]
    assert [r.sram_writes_output for r in reps] == [16 * 128, 8 * 128, 4 * 128, 2 * 128, 128]
    assert all(r.macs == m * k * n for r in reps)
    assert all(r.sram_reads_weight == k * n and r.sram_reads_input == 2 * m * k for r in reps)
    # fill/drain is paid per fold: (R - 1) + (C - 1) = 6 cycles for each of row_folds x 2 folds
    overhead = [r.compute_cycles - r.col_folds * r.row_folds * (R * r.row_length + r.row_length * m) for r in reps]
    assert overhead == [r.folds * 6 for r in reps]
    # load + stream cost the same for every L; only the per-fold fill/drain shrinks
    assert [r.compute_cycles for r in reps] == [2 * (64 + 64 * 16 // 4 + 64 * 6 // (4 * L)) for L in (1, 2, 4, 8, 16)]
    # past what k fills, the padded fold wastes slots on every token
    rs = {L: get_dataflow("rs", overrides={"register_file_words.weight": 32}, row_length=L) for L in (16, 32)}
    assert rs[32].compute_cycles(m, k, n, R, C) > rs[16].compute_cycles(m, k, n, R, C)


# --------------------------------------------------------------------------- invariants


@pytest.mark.parametrize("name,opts", [("os", {}), ("ws", {}), ("is", {}), ("rs", {"row_length": 1}),
                                       ("rs", {"row_length": 3}), ("rs", {"row_length": 16})])
def test_invariants(name, opts):
    rng = np.random.default_rng(11)
    size = 4000
    m, k, n = (rng.integers(1, 2000, size) for _ in range(3))
    R, C = rng.integers(1, 130, size), rng.integers(1, 130, size)
    r = get_dataflow(name, **opts).fold_report(m, k, n, R, C)
    macs = m * k * n
    np.testing.assert_array_equal(r.macs, macs)
    assert np.all(r.compute_cycles * R * C >= macs)
    assert np.all(r.utilization <= 1.0) and np.all(r.utilization > 0)
    assert np.all(r.mapping_efficiency <= 1.0) and np.all(r.mapping_efficiency > 0)
    np.testing.assert_array_equal(r.scalesim_cycles, r.compute_cycles - 1)
    np.testing.assert_array_equal(r.folds, r.passes * r.row_folds * r.col_folds)
    np.testing.assert_array_equal(r.compute_cycles, r.folds * r.cycles_per_fold)
    # every MAC reads one input word and one weight word from its PE
    np.testing.assert_array_equal(r.rf_reads_input, macs)
    np.testing.assert_array_equal(r.rf_reads_weight, macs)
    # each output is finished exactly once; every other write is a partial read back later
    np.testing.assert_array_equal(r.sram_writes_output - r.sram_reads_psum, m * n)
    assert np.all(r.sram_reads_input >= m * k) and np.all(r.sram_reads_weight >= k * n)
    for f in ACCESS_FIELDS:
        assert np.all(getattr(r, f) >= 0), f
    # mapping efficiency × folds × array = the slots holding work
    np.testing.assert_allclose(r.utilization * r.compute_cycles * R * C, macs, rtol=1e-12)


def test_compute_cycles_lower_bound_is_reached_by_large_aligned_gemms():
    r = get_dataflow("ws").fold_report(1_000_000, 128, 128, 128, 128)
    assert r.utilization > 0.999


# --------------------------------------------------------------------------- vectorisation


@pytest.mark.parametrize("name", ["os", "ws", "is", "rs"])
def test_arrays_agree_with_scalars(name):
    rng = np.random.default_rng(7)
    m, k, n = (rng.integers(1, 500, 40) for _ in range(3))
    R, C = rng.integers(1, 40, 40), rng.integers(1, 40, 40)
    df = get_dataflow(name, row_length=2) if name == "rs" else get_dataflow(name)
    vec = df.fold_report(m, k, n, R, C)
    cyc = df.compute_cycles(m, k, n, R, C)
    acc = df.accesses(m, k, n, R, C)
    for i in range(40):
        one = df.fold_report(int(m[i]), int(k[i]), int(n[i]), int(R[i]), int(C[i]))
        assert isinstance(one.compute_cycles, int) and isinstance(one.mapping_efficiency, float)
        assert cyc[i] == one.compute_cycles
        for f in FoldReport.__dataclass_fields__:
            if f == "dataflow":
                continue
            v = getattr(vec, f)[i]
            assert v == pytest.approx(getattr(one, f), rel=1e-12), f
        for f in ACCESS_FIELDS:
            assert acc[f][i] == getattr(one, f)


def test_broadcasting_and_module_functions():
    m = np.array([[1], [64], [4096]])
    rows = np.array([8, 32, 128])
    cyc = gemm_compute_cycles(m, 256, 512, rows, rows, dataflow="ws")
    assert cyc.shape == (3, 3)
    assert cyc[1, 2] == get_dataflow("ws").compute_cycles(64, 256, 512, 128, 128)
    acc = gemm_accesses(m, 256, 512, rows, rows, dataflow="rs", row_length=4)
    assert set(acc) == set(ACCESS_FIELDS) and acc["sram_reads_psum"].shape == (3, 3)
    rep = fold_report(64, 256, 512, 32, 32, dataflow="rs", row_length=4)
    assert rep.row_length == 4
    assert rep.compute_cycles == gemm_compute_cycles(64, 256, 512, 32, 32, dataflow="rs", row_length=4)
    assert get_dataflow("ws").fold_report(np.int32(5), np.int64(6), 7.0, 4, 4).compute_cycles == \
        get_dataflow("ws").compute_cycles(5, 6, 7, 4, 4)


def test_report_helpers():
    r = get_dataflow("ws").fold_report(5, 6, 3, 4, 2)
    d = r.to_dict()
    assert d["compute_cycles"] == 52 and d["dataflow"] == "ws"
    assert r.sram_reads == r.sram_reads_input + r.sram_reads_weight + r.sram_reads_psum
    assert r.accesses() == {f: getattr(r, f) for f in ACCESS_FIELDS}
    with pytest.raises(Exception):
        r.compute_cycles = 1  # frozen


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "8", None, float("nan"), np.array([4, 0, 2])])
def test_impossible_dims_raise_shape_error(bad):
    for name in ("os", "ws", "is", "rs"):
        df = get_dataflow(name)
        with pytest.raises(ShapeError):
            df.fold_report(bad, 4, 4, 4, 4)
        with pytest.raises(ShapeError):
            df.compute_cycles(4, 4, 4, bad, 4)
        with pytest.raises(ShapeError):
            df.accesses(4, 4, 4, 4, bad)


def test_shape_error_messages_name_the_dimension():
    with pytest.raises(ShapeError, match=r"dimension k must be >= 1, got 0"):
        get_dataflow("ws").fold_report(4, 0, 4, 4, 4)
    with pytest.raises(ShapeError, match=r"dimension rows must be >= 1, got -1 at index \(2,\)"):
        gemm_compute_cycles(4, 4, 4, np.array([1, 2, -1]), 4, dataflow="os")
    with pytest.raises(ShapeError, match="broadcast"):
        gemm_compute_cycles(np.ones(3, int), np.ones(4, int), 4, 4, 4, dataflow="os")


# --------------------------------------------------------------------------- specs and registry


def test_registry_lists_and_loads_the_four_dataflows():
    assert list_dataflows() == ["is", "os", "rs", "ws"]
    assert dataflow_dir().name == "dataflows"
    kinds = {n: type(get_dataflow(n)) for n in list_dataflows()}
    assert kinds == {"is": SystolicDataflow, "os": SystolicDataflow, "ws": SystolicDataflow,
                     "rs": RowStationaryDataflow}
    ws = get_dataflow("ws").spec
    assert (ws.stationary_operand, ws.spatial_rows, ws.spatial_cols, ws.temporal) == ("weight", "k", "n", "m")
    os_ = get_dataflow("os").spec
    assert (os_.stationary_operand, os_.spatial_rows, os_.spatial_cols, os_.temporal) == ("output", "m", "n", "k")
    is_ = get_dataflow("is").spec
    assert (is_.stationary_operand, is_.spatial_rows, is_.spatial_cols, is_.temporal) == ("input", "k", "m", "n")
    rs = get_dataflow("rs").spec
    assert (rs.stationary_operand, rs.row_length) == ("weight_row", 1)
    assert rs.register_file_words.weight >= rs.row_length
    assert get_dataflow("Weight-Stationary") is get_dataflow("ws")        # full names, cached
    assert get_dataflow(get_dataflow("os")) is get_dataflow("os")
    assert get_dataflow(ws).spec == ws


def test_unknown_dataflow_lists_valid_names():
    with pytest.raises(UnknownNameError) as e:
        get_dataflow("wss")
    msg = str(e.value)
    assert "did you mean 'ws'" in msg and "valid: is, os, rs, ws" in msg


def test_options_and_overrides():
    rs3 = get_dataflow("rs", row_length=3)
    assert rs3.row_length == 3 and get_dataflow("rs").row_length == 1
    assert rs3.with_options(row_length=5).row_length == 5
    big = get_dataflow("rs", overrides=["row_length=32", "register_file_words.weight=32"])
    assert big.row_length == 32
    with pytest.raises(ConfigError, match="row_length must not exceed the weight register file"):
        get_dataflow("rs", row_length=17)
    with pytest.raises(ConfigError, match="row_length applies to the row-stationary dataflow only"):
        get_dataflow("ws", row_length=2)
    with pytest.raises(ConfigError, match="spatial_rows must be k"):
        get_dataflow("ws", spatial_rows="n", spatial_cols="k")
    # OS may put n on the rows (the transposed product); the formulas follow the mapping
    osT = get_dataflow("os", spatial_rows="n", spatial_cols="m")
    a, b = osT.fold_report(7, 5, 11, 4, 3), get_dataflow("os").fold_report(11, 5, 7, 4, 3)
    assert a.compute_cycles == b.compute_cycles
    assert (a.sram_reads_input, a.sram_reads_weight) == (b.sram_reads_weight, b.sram_reads_input)


def _write_dataflows(folder, **replace):
    src = dataflow_dir()
    for p in src.glob("*.yaml"):
        text = p.read_text()
        for old, new in replace.get(p.stem, []):
            assert old in text
            text = text.replace(old, new)
        (folder / p.name).write_text(text)


def test_yaml_errors_name_file_and_line(tmp_path, monkeypatch):
    _write_dataflows(tmp_path, ws=[("temporal: m ", "temporl: m ")],
                     rs=[("row_length: 1 ", "row_length: 40 ")],
                     os=[("stationary_operand: output", "stationary_operand: input")])
    monkeypatch.setenv("SIM_DATAFLOW_DIR", str(tmp_path))  # searched first: these files override the shipped ones
    clear_cache()
    try:
        assert list_dataflows() == ["is", "os", "rs", "ws"]
        ws_lines = (tmp_path / "ws.yaml").read_text().splitlines()
        bad_line = next(i for i, l in enumerate(ws_lines, 1) if l.startswith("temporl"))
        with pytest.raises(ConfigError) as e:
            get_dataflow("ws")
        assert f"ws.yaml:{bad_line}: temporl: unknown key 'temporl'; did you mean 'temporal'?" in str(e.value)
        rs_lines = (tmp_path / "rs.yaml").read_text().splitlines()
        rl_line = next(i for i, l in enumerate(rs_lines, 1) if l.startswith("row_length"))
        with pytest.raises(ConfigError, match=rf"rs.yaml:{rl_line}: row_length: row_length must not exceed"):
            get_dataflow("rs")
        with pytest.raises(ConfigError, match=r"os.yaml:\d+: spatial_rows: with stationary_operand 'input' "
                                              r"the array must hold the dimensions of the input \(k and m\)"):
            get_dataflow("os")
        assert get_dataflow("is").name == "is"
    finally:
        monkeypatch.delenv("SIM_DATAFLOW_DIR")
        clear_cache()


def test_file_name_must_match_name_and_syntax_errors(tmp_path, monkeypatch):
    _write_dataflows(tmp_path)
    (tmp_path / "ws.yaml").rename(tmp_path / "tpu.yaml")
    (tmp_path / "broken.yaml").write_text("name: [unclosed\n")
    monkeypatch.setenv("SIM_DATAFLOW_DIR", str(tmp_path))
    clear_cache()
    try:
        with pytest.raises(ConfigError, match=r"name 'ws' must equal the file name 'tpu'"):
            get_dataflow("tpu")
        with pytest.raises(ConfigError, match=r"broken.yaml:\d+: YAML syntax error"):
            get_dataflow("broken")
        # the shipped dataflows are still found, and an unknown name lists every file registered
        assert get_dataflow("ws").name == "ws"
        with pytest.raises(UnknownNameError, match=r"valid: broken, is, os, rs, tpu, ws"):
            get_dataflow("nope")
    finally:
        monkeypatch.delenv("SIM_DATAFLOW_DIR")
        clear_cache()
    monkeypatch.setenv("SIM_DATAFLOW_DIR", str(tmp_path / "nowhere"))
    try:
        with pytest.raises(ConfigError, match=r"dataflow folder not found \(named by SIM_DATAFLOW_DIR\)"):
            list_dataflows()
    finally:
        monkeypatch.delenv("SIM_DATAFLOW_DIR")


def test_spec_is_frozen_and_forbids_extra_keys():
    spec = get_dataflow("ws").spec
    with pytest.raises(Exception):
        spec.row_length = 3
    data = spec.model_dump()
    data["colour"] = "blue"
    with pytest.raises(Exception, match="colour"):
        DataflowSpec.model_validate(data)


def test_a_new_dataflow_file_is_usable_by_a_chip_without_code(tmp_path, monkeypatch):
    """Issue 10: 'A new dataflow file in dataflows/ is usable by a chip without a code change.'
    A copy of ws.yaml named ws2 in the user folder is listed by a chip and runs exactly as ws;
    a name no file has is a config error that lists the catalog's names."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "dataflows" / "ws.yaml"
    (tmp_path / "dataflows").mkdir()
    (tmp_path / "dataflows" / "ws2.yaml").write_text(re.sub(r"(?m)^name: ws$", "name: ws2", src.read_text()))
    env = {**__import__("os").environ, "SIM_USER_DIR": str(tmp_path)}

    def gemm(*extra):
        return subprocess.run([sys.executable, "-m", "sim", "gemm", "npu_128x128", "--m", "256", "--k", "256",
                               "--n", "256", "--memory", "ideal", *extra], capture_output=True, text=True, env=env)

    new = gemm("--set", "cores.arrays.0.dataflows=[ws,ws2]", "--dataflow", "ws2")
    old = gemm("--dataflow", "ws")
    assert new.returncode == 0, new.stderr
    cycles = [re.search(r"^  cycles\s+([\d,]+)", r.stdout, re.M).group(1) for r in (new, old)]
    assert cycles[0] == cycles[1]
    bad = gemm("--set", "cores.arrays.0.dataflows=[ws,wss]")
    assert bad.returncode == 2 and "unknown dataflow 'wss'; did you mean 'ws'?" in bad.stderr
    assert "Traceback" not in bad.stderr
