rule models:
    output:
        f"{RESULTS}/{{study}}/models.json",
    log:
        f"{RESULTS}/{{study}}/logs/models.log",
    threads: 1
    resources:
        mem_mb=4000,
    params:
        cmd=stage_cmd("models"),
    shell:
        "{params.cmd}"


rule prompts:
    output:
        f"{RESULTS}/{{study}}/prompts.jsonl",
    log:
        f"{RESULTS}/{{study}}/logs/prompts.log",
    threads: 1
    resources:
        mem_mb=500,
    params:
        cmd=stage_cmd("prompts"),
    shell:
        "{params.cmd}"


rule provenance:
    input:
        f"{RESULTS}/{{study}}/models.json",
        f"{RESULTS}/{{study}}/prompts.jsonl",
    output:
        f"{RESULTS}/{{study}}/provenance.json",
    log:
        f"{RESULTS}/{{study}}/logs/provenance.log",
    threads: 1
    resources:
        mem_mb=1000,
    params:
        cmd=stage_cmd("provenance"),
    shell:
        "{params.cmd}"
