rule paper:
    input:
        source="paper/paper.typ",
        numbers=f"{PAPER}/build/numbers.json",
        figures=expand(f"{FIGURES}/{{study}}/{{name}}.png", study=head_study(), name=FIGURE_NAMES),
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
    shell:
        "specproof paper --source {input.source} --numbers {input.numbers} --figures {params.figures} "
        "--out {output} > {log} 2>&1"
