rule models:
    output:
        f"{RESULTS}/{{study}}/models.json",
    log:
        f"{RESULTS}/{{study}}/logs/models.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=4000,
    shell:
        stage_cmd("models")


rule prompts:
    output:
        f"{RESULTS}/{{study}}/prompts.jsonl",
    log:
        f"{RESULTS}/{{study}}/logs/prompts.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=500,
    shell:
        stage_cmd("prompts")


rule provenance:
    input:
        f"{RESULTS}/{{study}}/models.json",
        f"{RESULTS}/{{study}}/prompts.jsonl",
    output:
        f"{RESULTS}/{{study}}/provenance.json",
    log:
        f"{RESULTS}/{{study}}/logs/provenance.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=1000,
    shell:
        stage_cmd("provenance")
