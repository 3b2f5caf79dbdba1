from spanqa.cli.root import main

main()
