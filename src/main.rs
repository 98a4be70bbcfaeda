fn main() -> anyhow::Result<()> {
    dialect_proxy::cli::main()
}
