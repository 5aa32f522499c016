rule paper:
    input:
        source="paper/paper.typ",
        cited="paper/cited.yaml",
        numbers=f"{PAPER}/build/numbers.json",
        figures=expand(f"{FIGURES}/{{set}}/{{name}}.png", set=head_study(), name=FIGURE_NAMES),
        machines=f"{FIGURES}/machines/verify_cost_machines.png" if len(head_machines()) > 1 else [],
    output:
        f"{PAPER}/paper.pdf",
    log:
        f"{PAPER}/build/paper.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    params:
        figures=lambda w: f"{FIGURES}/{head_study()}",
        machines=f"{FIGURES}/machines",
    shell:
        "specproof paper --source {input.source} --numbers {input.numbers} --figures {params.figures} "
        "--machine-figures {params.machines} --cited {input.cited} --out {output} > {log} 2>&1"
