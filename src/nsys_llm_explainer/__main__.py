from nsys_llm_explainer.cli import main

if __name__ == "__main__":
    main()
