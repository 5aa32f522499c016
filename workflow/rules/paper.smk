# The paper's source: paper/paper.typ is written for the record set config.yaml heads; a
# config for another head study (the end-to-end test's) names the generic report template.
rule paper:
    input:
        source=config.get("paper_source", "paper/paper.typ"),
        cited="paper/cited.yaml",
        numbers=f"{PAPER}/build/numbers.json",
        figures=expand(f"{FIGURES}/{{set}}/{{name}}.png", set=head_study(), name=FIGURE_NAMES),
        machines=f"{FIGURES}/machines/verify_cost_machines.png" if len(head_machines()) > 1 else [],
        breakeven=break_even_png(),
    output:
        f"{PAPER}/paper.pdf",
    log:
        f"{PAPER}/build/paper.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    # directories from the files they hold (no hard-coded prefix: snakemake --lint); with
    # one machine the paper shows no machines figure and the head study's directory stands in
    params:
        figures=lambda w, input: str(Path(input.figures[0]).parent),
        machines=lambda w, input: str(Path(input.machines if input.machines else input.figures[0]).parent),
        breakeven=lambda w, input: str(Path(input.breakeven[0] if input.breakeven else input.figures[0]).parent),
    shell:
        "specproof paper --source {input.source:q} --numbers {input.numbers:q} --figures {params.figures:q} "
        "--machine-figures {params.machines:q} --map-figures {params.breakeven:q} --cited {input.cited:q} --out {output:q} > {log:q} 2>&1"
