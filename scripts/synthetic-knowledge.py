#!/usr/bin/env python3
"""Writes a synthetic knowledge folder of about CHUNKS chunks into DIR (for benchmarks that need
a big corpus on disk, e.g. `cargo bench -p ragtrail-cli --bench http_load -- --knowledge DIR`).

    python3 scripts/synthetic-knowledge.py CHUNKS DIR

The corpus of `cargo bench -p ragtrail --bench retrieval -- --synthetic N` (one tenant):
Markdown files of 50 sections, each section 40 words drawn from a small Chinese and English
vocabulary by the same xorshift generator, so both benches index the same text.
"""
import os
import sys

ZH = "报销 发票 差旅 住宿 标准 审批 出差 补贴 凭证 年假 病假 退货 保修 密码 设备 采购 合同 金额 部门 员工 提交 期限 流程 系统 城市 交通 餐饮 会议 培训 证明".split()
EN = "claim invoice travel hotel limit approval receipt leave refund warranty password device purchase contract amount manager deadline policy system city meal training form office remote".split()
MASK = (1 << 64) - 1
PER_FILE = 50


def main() -> None:
    chunks, out = int(sys.argv[1]), sys.argv[2]
    os.makedirs(out, exist_ok=True)
    state = 0x9E3779B97F4A7C15

    def pick(n: int) -> int:
        nonlocal state
        state ^= (state << 13) & MASK
        state ^= state >> 7
        state ^= (state << 17) & MASK
        return state % n

    for f in range((chunks + PER_FILE - 1) // PER_FILE):
        parts = [f"---\ntitle: Synthetic {f}\ntenant: default\n---\n\n"]
        for s in range(PER_FILE):
            parts.append(f"## Section {s} {ZH[pick(len(ZH))]}\n\n")
            for _ in range(40):
                if pick(2) == 0:
                    parts.append(ZH[pick(len(ZH))])
                else:
                    parts.append(f" {EN[pick(len(EN))]} ")
            parts.append("。\n\n")
        with open(os.path.join(out, f"doc{f:05}.md"), "w", encoding="utf-8") as fh:
            fh.write("".join(parts))


if __name__ == "__main__":
    main()
